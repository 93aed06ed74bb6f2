"""What the model is told at each turn, and how its kernel is read back out of its answer."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

SYSTEM = "You are an expert GPU programmer. You write fast, correct Triton kernels that replace PyTorch reference code."

FIRST_TURN = """Here is a PyTorch reference implementation:

```python
{reference}
```

Write a new module `ModelNew` with the same constructor and forward signature as `Model` that computes the same
result using custom Triton kernels (`@triton.jit`) for the main work. Return exactly one ```python``` block that
contains the whole module (imports, kernels and `class ModelNew`)."""

NEXT_TURN = """The evaluation service ran your last implementation. Its feedback:

{feedback}

Improve the implementation: fix any error, then make it faster. Return exactly one ```python``` block with the
whole module defining `class ModelNew`."""

_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Extraction:
    code: str | None
    problem: str | None  # why no code could be taken, for the next turn's feedback


def first_turn(reference: str) -> str:
    return FIRST_TURN.format(reference=reference.strip())


def opening(reference: str) -> list[dict[str, str]]:
    """An episode's first chat: the system prompt and the first turn."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": first_turn(reference)}]


def next_turn(feedback: str, max_chars: int = 2000) -> str:
    return NEXT_TURN.format(feedback=cap(feedback, max_chars))


def cap(text: str, max_chars: int) -> str:
    """Keep the head and the tail (where tracebacks end) of an over-long text."""
    text = text.strip()
    if len(text) <= max_chars:
        return text
    half = (max_chars - 20) // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def extract_code(answer: str) -> Extraction:
    """The kernel module in an answer: the last fenced block that defines `class ModelNew` (python-tagged blocks
    preferred), else the last fenced block; an unclosed final fence counts. Prose around it is ignored."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(answer)]
    tail = answer.rsplit("```", 1)
    if answer.count("```") % 2 == 1 and len(tail) == 2:  # a final block the model never closed
        lang, _, body = tail[1].partition("\n")
        blocks.append((lang.strip().lower(), body))
    if not blocks:
        return Extraction(None, "no ```python``` code block was found in the answer")
    defining = [b for b in blocks if re.search(r"^\s*class\s+ModelNew\b", b[1], re.MULTILINE)]
    preferred = [b for b in defining if b[0] in ("python", "py", "")] or defining
    code = (preferred or blocks)[-1][1].strip() + "\n"
    if not re.search(r"^\s*class\s+ModelNew\b", code, re.MULTILINE):
        return Extraction(None, "the code block does not define `class ModelNew`")
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return Extraction(None, f"the code block is not valid Python: {exc.msg} (line {exc.lineno})")
    return Extraction(code, None)
