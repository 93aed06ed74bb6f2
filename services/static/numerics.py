"""Global numeric flags (hard): TF32, matmul precision, default dtype and device, determinism. They change the
reference's numerics and speed too, in a harness that runs both in one process. Assignments to
`torch.backends.*` are caught with the other patches (services.static.patching)."""

from __future__ import annotations

import ast

from services.static.rules import NUMERIC_FLAG_CHANGE
from services.static.scan import Scan

NUMERIC_CALLS = frozenset(
    {
        "torch.set_float32_matmul_precision",
        "torch.set_default_dtype",
        "torch.set_default_tensor_type",
        "torch.set_default_device",
        "torch.use_deterministic_algorithms",
        "torch.set_deterministic_debug_mode",
        "torch.set_flush_denormal",
    }
)
BACKEND_SETTERS = ("enable_", "preferred_", "set_")  # torch.backends.<x>.<setter>(...)


def changes_flags(fname: str) -> bool:
    """Whether calling `fname` sets a global numeric flag."""
    return fname in NUMERIC_CALLS or (
        fname.startswith("torch.backends.") and fname.rsplit(".", 1)[-1].startswith(BACKEND_SETTERS)
    )


def check_flag_call(scan: Scan, node: ast.Call, fname: str) -> None:
    scan.add(NUMERIC_FLAG_CHANGE, node, f"{fname}() changes global numerics (also the reference's); remove it.")
