"""Precision downgrades (advisory): casts to fp16/bf16/fp8, TF32 in `tl.dot`, autocast. Legitimate for a
problem in that precision, so only the correctness comparison can decide."""

from __future__ import annotations

import ast
from collections.abc import Iterable

from services.static.names import const_str
from services.static.rules import PRECISION_DOWNGRADE, NameRule
from services.static.scan import Scan

AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast"})
LOW_DTYPES = frozenset({"float16", "half", "bfloat16"})
TF32_PRECISIONS = ("tf32", "tf32x3")

AUTOCAST_RULE = NameRule(
    PRECISION_DOWNGRADE, AUTOCAST, "{q} lowers matmul/conv precision; compute in the problem's dtype."
)


def check_dot(scan: Scan, node: ast.Call, fname: str) -> None:
    kw = {k.arg: k.value for k in node.keywords}
    precision = kw.get("input_precision", node.args[3] if len(node.args) > 3 else None)
    tf32 = kw.get("allow_tf32", node.args[4] if len(node.args) > 4 else None)
    if isinstance(tf32, ast.Constant) and tf32.value is True:
        scan.add(PRECISION_DOWNGRADE, node, "tl.dot(allow_tf32=True) rounds fp32 inputs to TF32.")
    elif const_str(precision) in TF32_PRECISIONS:
        scan.add(PRECISION_DOWNGRADE, node, f'tl.dot(input_precision="{const_str(precision)}") rounds fp32 to TF32.')
    elif precision is None and tf32 is None:
        scan.add(
            PRECISION_DOWNGRADE,
            node,
            'tl.dot defaults to TF32 for fp32 inputs; pass input_precision="ieee" if the problem is fp32.',
        )


def _check_cast(scan: Scan, node: ast.Call, dtypes: Iterable[ast.AST]) -> None:
    for d in dtypes:
        q = scan.names.resolve(d)
        if not q or not q.startswith(("torch.", "triton.language.")):
            continue
        leaf = q.rsplit(".", 1)[-1]
        if leaf in LOW_DTYPES or leaf.startswith("float8"):
            scan.add(PRECISION_DOWNGRADE, node, f"Cast to {q} downcasts; compute in the problem's dtype.")
            return


def check_tl_cast(scan: Scan, node: ast.Call, fname: str) -> None:
    if len(node.args) >= 2:
        _check_cast(scan, node, node.args[1:2])


def check_half(scan: Scan, node: ast.Call, method: str) -> None:
    scan.add(PRECISION_DOWNGRADE, node, f".{method}() downcasts; compute in the problem's dtype.")


def check_to(scan: Scan, node: ast.Call, method: str) -> None:
    """`x.to(dtype)`, `x.type(dtype)`, `x.to(dtype=...)`."""
    _check_cast(scan, node, [*node.args, *(k.value for k in node.keywords if k.arg == "dtype")])


CALLS = {"triton.language.dot": check_dot, "triton.language.cast": check_tl_cast}
METHODS = {"half": check_half, "bfloat16": check_half, "to": check_to, "type": check_to}
