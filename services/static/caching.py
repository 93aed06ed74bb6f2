"""Results replayed across calls (advisory, A5): memoised launchers and containers keyed on a tensor's
`data_ptr()`, `id()` or `hash()`. Every timed call gets fresh inputs, so the re-checks catch a replay at run
time; this tells the agent why."""

from __future__ import annotations

import ast

from services.static.compute import compute_ops
from services.static.kernels import is_jit
from services.static.names import targets
from services.static.rules import RESULT_CACHE
from services.static.scan import Scan

MEMOISERS = ("functools.lru_cache", "functools.cache")


def check_function(scan: Scan, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    """A Triton kernel is compiled once per signature by design; any other function is checked."""
    if not any(is_jit(scan, d) for d in node.decorator_list):
        check_result_cache(scan, node)


def check_result_cache(scan: Scan, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    """A5, heuristically: data_ptr()/id()/hash() values used as a container key, or a memoised launcher."""
    names = scan.names
    for dec in fn.decorator_list:
        q = names.resolve(dec.func if isinstance(dec, ast.Call) else dec)
        if q in MEMOISERS:
            tensor_arg = any(names.resolve(a.annotation) == "torch.Tensor" for a in fn.args.args if a.annotation)
            launches = any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) for s in fn.body for n in ast.walk(s)
            )
            if tensor_arg or launches or next(compute_ops(scan, fn.body), None):
                scan.add(RESULT_CACHE, dec, f"{q} on {fn.name}() memoises results across calls; recompute them.")

    def is_key_call(n: ast.AST) -> bool:
        if not isinstance(n, ast.Call):
            return False
        if isinstance(n.func, ast.Attribute) and n.func.attr == "data_ptr":
            return True
        return names.callee(n) in ("builtins.id", "builtins.hash")

    nodes = [n for s in fn.body for n in ast.walk(s)]
    if not any(is_key_call(n) for n in nodes):
        return
    tainted: set[str] = set()
    for _ in range(2):
        for n in nodes:
            if (
                isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr)
                and n.value is not None
                and any(is_key_call(v) or (isinstance(v, ast.Name) and v.id in tainted) for v in ast.walk(n.value))
            ):
                stores = n.targets if isinstance(n, ast.Assign) else [n.target]
                tainted |= {t.id for r in stores for t in targets(r) if isinstance(t, ast.Name)}

    def keyed(expr: ast.AST | None) -> bool:
        return expr is not None and any(
            is_key_call(v) or (isinstance(v, ast.Name) and v.id in tainted) for v in ast.walk(expr)
        )

    uses = []
    for n in nodes:
        key = None
        if isinstance(n, ast.Subscript):
            key = n.slice
        elif isinstance(n, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in n.ops):
            key = n.left
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("get", "setdefault", "pop", "__contains__")
        ):
            key = n.args[0] if n.args else None
        if keyed(key):
            uses.append(n.lineno)
    if uses:  # once per function, at the first keyed use
        scan.add(
            RESULT_CACHE,
            min(uses),
            "A container keyed on data_ptr()/id()/hash() replays results across calls; recompute every call.",
        )
