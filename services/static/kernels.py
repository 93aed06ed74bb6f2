"""The one hard rule about what a submission must contain: at least one `@triton.jit` kernel."""

from __future__ import annotations

import ast

from services.static.rules import NO_TRITON_KERNEL
from services.static.scan import Scan


def is_jit(scan: Scan, node: ast.AST) -> bool:
    """Whether a decorator (or the callee of `triton.jit(fn)`) is Triton's jit, however it was imported."""
    target = node.func if isinstance(node, ast.Call) else node
    q = scan.names.resolve(target)
    if q is None and isinstance(target, ast.Name) and target.id == "jit":
        return "triton" in scan.names.star
    return bool(q) and q.startswith("triton.") and q.rsplit(".", 1)[-1] == "jit"


def kernels(scan: Scan) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions decorated as Triton kernels (compute in them is the candidate's own, never PyTorch's)."""
    return [
        n
        for n in ast.walk(scan.tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and any(is_jit(scan, d) for d in n.decorator_list)
    ]


def check_kernel_present(scan: Scan) -> None:
    if kernels(scan):
        return
    # `kernel = triton.jit(fn)` also defines a kernel.
    for node in ast.walk(scan.tree):
        if isinstance(node, ast.Call) and node.args and is_jit(scan, node.func):
            return
    scan.add(
        NO_TRITON_KERNEL,
        0,
        "No function is decorated with @triton.jit; the computation must be written as a Triton kernel.",
    )
