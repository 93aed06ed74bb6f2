"""Which tree a benchmark ran: `KERNELGYM_COMMIT` where the copy's git metadata cannot be trusted (the GPU
machine runs a copy of the working tree whose `.git` may be older than the files), else git's HEAD."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def commit() -> str:
    if named := os.environ.get("KERNELGYM_COMMIT"):
        return named
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
