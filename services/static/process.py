"""Processes and their environment: spawning, signalling or ending a process and hooking its exit (hard),
installing packages (hard), and changing the environment (advisory)."""

from __future__ import annotations

import ast
import re

from services.static.rules import ENV_MUTATION, PACKAGE_INSTALL, PROCESS_SPAWN, NameRule
from services.static.scan import Scan

PROCESS_NAMES = frozenset(
    {
        "os.system",
        "os.popen",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "os._exit",
        "os.abort",
        "os.register_at_fork",
        "sys.exit",
        "atexit.register",
        "asyncio.create_subprocess_exec",
        "asyncio.create_subprocess_shell",
        "pty.spawn",
        "pty.fork",
    }
)
PROCESS_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn")
ENV_NAMES = frozenset({"os.putenv", "os.unsetenv"})
ENV_METHODS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"})
PACKAGE_INSTALL_TEXT = re.compile(r"\b(?:pip3?|conda|mamba|micromamba|uv\s+pip)\s+install\b|\bensurepip\b", re.I)

PROCESS_RULE = NameRule(
    PROCESS_SPAWN,
    PROCESS_NAMES,
    "{q} starts, signals or ends processes (or hooks exit); remove it.",
    PROCESS_PREFIXES,
)
ENV_RULE = NameRule(ENV_MUTATION, ENV_NAMES, "{q} changes the environment; remove it.")


def check_exit_call(scan: Scan, node: ast.Call, fname: str) -> None:
    scan.add(PROCESS_SPAWN, node, f"{fname[9:]}() ends the process; a submission must return normally.")


CALLS = {"builtins.exit": check_exit_call, "builtins.quit": check_exit_call}


def check_environ_call(scan: Scan, node: ast.Call) -> None:
    """`os.environ.update(...)` and the other mutating methods of the environment mapping."""
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in ENV_METHODS and scan.names.resolve(func.value) == "os.environ":
        scan.add(ENV_MUTATION, node, f"os.environ.{func.attr}() changes the environment; remove it.")


def check_environ_store(scan: Scan, target: ast.Subscript) -> None:
    if scan.names.resolve(target.value) == "os.environ":
        scan.add(ENV_MUTATION, target, "Writing os.environ changes the environment; remove it.")


def check_raise(scan: Scan, node: ast.Raise) -> None:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    if isinstance(exc, ast.Name) and exc.id == "SystemExit" and exc.id not in scan.names.bound:
        scan.add(PROCESS_SPAWN, node, "raise SystemExit ends the process; a submission must return normally.")


def check_install_text(scan: Scan, node: ast.Constant) -> None:
    """A string that would install packages if handed to a shell (`pip install x`)."""
    if isinstance(node.value, str) and id(node) not in scan.docstrings:
        m = PACKAGE_INSTALL_TEXT.search(node.value)
        if m:
            scan.add(PACKAGE_INSTALL, node, f"String {m.group(0)!r}: installing packages at run time is not allowed.")
