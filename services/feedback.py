"""Short text an LLM agent can act on: what failed, where, and the numbers."""

from __future__ import annotations

import re

from services.compare import Comparison
from services.schema import RuntimeStats

_TB_LIMIT = 2500
_SIGNAL_HINTS = {
    "SIGSEGV": "often an unmasked out-of-bounds load or store",
    "SIGBUS": "often a misaligned or out-of-bounds access",
    "SIGABRT": "the process aborted, e.g. heap corruption from an out-of-bounds store",
    "SIGKILL": "killed from outside, e.g. for exceeding a resource limit",
}


def trim_traceback(tb: str, tmpdir: str | None = None) -> str:
    """Keep the frames of the submitted code and the exception itself; drop harness frames."""
    if tmpdir:
        tb = tb.replace(tmpdir + "/", "")
    lines = tb.rstrip().splitlines()
    kept: list[str] = []
    keep_next = False
    for line in lines:
        if line.startswith("  File "):
            keep_next = "kg_candidate.py" in line or "kg_reference.py" in line
            if keep_next:
                kept.append(line)
            continue
        if line.startswith("    "):
            if keep_next:
                kept.append(line)
            continue
        kept.append(line)
    text = "\n".join(kept)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text if len(text) <= _TB_LIMIT else "…" + text[-_TB_LIMIT:]


def signal_hint(signal_name: str | None) -> str:
    return _SIGNAL_HINTS.get(signal_name or "", "")


def mismatch(trial: int, trials: int, cmp: Comparison, tf32_suspect: bool) -> str:
    text = (
        f"Output mismatch on correctness trial {trial + 1}/{trials}: {cmp.reason}. "
        f"Max absolute error {cmp.max_abs_error:.3g}, max relative error {cmp.max_rel_error:.3g}."
    )
    if tf32_suspect:
        text += (
            " The errors look like TF32 rounding: on fp32 inputs `tl.dot` uses TF32 by default; pass "
            '`input_precision="ieee"` to `tl.dot` to get fp32 accuracy.'
        )
    return text


def timing(cand: RuntimeStats, ref: RuntimeStats, speedup: float) -> str:
    return (
        f"Candidate median {cand.median_ms:.4g} ms (IQR {cand.iqr_ms:.2g}, n={cand.trials}) vs PyTorch "
        f"reference {ref.median_ms:.4g} ms (n={ref.trials}): speedup {speedup:.3f}x."
    )


def cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
