"""Parsing untrusted Python source in a trusted process (the gateway, a worker's parent).

CPython's parser fails on hostile input in more ways than SyntaxError: nesting deep enough to exhaust its stack
raises MemoryError or RecursionError, a NUL byte ValueError. Uncaught, one of those ends a request with a 500 or,
in a Celery task, takes the whole worker down (Celery treats MemoryError as unrecoverable). Here each is the one
error a caller already handles. (`services.static.triage`, standard library only by design, catches the same
errors itself.)
"""

from __future__ import annotations

import ast


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse`, raising SyntaxError for every way the parser can fail on its input."""
    try:
        return ast.parse(source, filename)
    except SyntaxError:
        raise
    except (RecursionError, MemoryError):
        raise SyntaxError("nested too deeply for Python's parser") from None
    except ValueError as exc:  # e.g. a NUL byte
        raise SyntaxError(str(exc)[:200]) from None
