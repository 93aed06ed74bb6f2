"""The walk: one pass over the tree, each node handed to the walkers of its kind, each call to the one walker
registered for what it calls. The rule families (the sibling modules) hold the tables and the walkers; this
module only dispatches, so adding a rule never means reading the others."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from services.static import (
    caching,
    compute,
    concurrency,
    dynamic,
    files,
    imports,
    kernels,
    numerics,
    patching,
    precision,
    process,
)
from services.static.names import const_str
from services.static.rules import Finding, NameRule
from services.static.scan import Scan

CallWalker = Callable[[Scan, ast.Call, str], None]


def _merge(*tables: dict[str, CallWalker]) -> dict[str, CallWalker]:
    """One walker per key: two families claiming one call would make the result depend on their order."""
    merged: dict[str, CallWalker] = {}
    for table in tables:
        if clash := merged.keys() & table.keys():
            raise ValueError(f"calls claimed by two rule families: {sorted(clash)}")
        merged |= table
    return merged


# What a call calls (its qualname) -> the walker that judges it.
CALLS = _merge(
    imports.CALLS, process.CALLS, dynamic.CALLS, patching.CALLS, files.CALLS, precision.CALLS, concurrency.CALLS
)
# A method called on a value (not on a module) -> the walker that judges it.
METHODS = _merge(precision.METHODS, concurrency.METHODS, patching.METHODS, files.METHODS)
# Every reference to a qualname, whether called, stored or passed on; the first rule that matches reports it.
NAME_RULES: tuple[NameRule, ...] = (
    process.PROCESS_RULE,
    concurrency.SIDE_STREAM_RULE,
    concurrency.CUDA_GRAPH_RULE,
    dynamic.FRAME_RULE,
    dynamic.DYNAMIC_RULE,
    files.FILE_RULE,
    precision.AUTOCAST_RULE,
    concurrency.THREAD_RULE,
    process.ENV_RULE,
    compute.COMPILE_RULE,
)


def check_call(scan: Scan, node: ast.Call) -> None:
    fname = scan.names.callee(node)
    func = node.func
    if fname in CALLS:
        CALLS[fname](scan, node, fname)
    elif fname and numerics.changes_flags(fname):
        numerics.check_flag_call(scan, node, fname)
    elif fname == "builtins.getattr":  # getattr(torch.cuda, "Event") is a reference to torch.cuda.Event
        if q := scan.names.resolve(node):
            check_name(scan, node, q)
    elif isinstance(func, ast.Attribute) and func.attr in METHODS and not scan.names.is_module_like(func.value):
        METHODS[func.attr](scan, node, func.attr)
    else:
        process.check_environ_call(scan, node)


def check_name(scan: Scan, node: ast.AST, q: str) -> None:
    for rule in NAME_RULES:
        if rule.matches(q):
            scan.add(rule.rule, node, rule.detail.format(q=q))
            return


def check_reference(scan: Scan, node: ast.Name | ast.Attribute) -> None:
    if not isinstance(node.ctx, ast.Load):
        return
    dynamic.check_frame_attribute(scan, node)
    patching.check_make_subclass(scan, node)
    dynamic.check_module_dict(scan, node)
    if q := scan.names.resolve(node):
        check_name(scan, node, q)


def check_constant(scan: Scan, node: ast.Constant) -> None:
    process.check_install_text(scan, node)
    files.check_shm_text(scan, node)


def check_function(scan: Scan, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    patching.check_dispatch_hook(scan, node)
    caching.check_function(scan, node)


# Node kind -> its walker. A node is of one kind, so the order here never matters.
NODES: dict[type[ast.AST], Callable[[Scan, Any], None]] = {
    ast.Import: imports.check_import,
    ast.ImportFrom: imports.check_import,
    ast.Call: check_call,
    ast.Name: check_reference,
    ast.Attribute: check_reference,
    ast.Assign: patching.check_assignment,
    ast.AugAssign: patching.check_assignment,
    ast.AnnAssign: patching.check_assignment,
    ast.Delete: patching.check_assignment,
    ast.Constant: check_constant,
    ast.Raise: process.check_raise,
    ast.Try: compute.check_try,
    ast.TryStar: compute.check_try,
    ast.ClassDef: patching.check_class,
    ast.FunctionDef: check_function,
    ast.AsyncFunctionDef: check_function,
}


def scan_tree(tree: ast.Module) -> list[Finding]:
    """Every finding in `tree`, sorted by line and code."""
    scan = Scan(tree)
    kernels.check_kernel_present(scan)
    for node in ast.walk(tree):
        walker = NODES.get(type(node))
        if walker is not None:
            walker(scan, node)
    compute.check_forward(scan)
    return scan.results()


def _is_main_guard(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":` (either operand order)."""
    if not (isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1):
        return False
    sides = [stmt.test.left, stmt.test.comparators[0]]
    return (
        isinstance(stmt.test.ops[0], ast.Eq)
        and any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
        and any(const_str(x) == "__main__" for x in sides)
    )


def drop_main_block(tree: ast.Module) -> None:
    """The loader imports the candidate under another module name, so a `__main__` block never runs.

    It is dropped (its `else` kept) unless the source rebinds `__name__` somewhere.
    """
    if any(isinstance(n, ast.Name) and n.id == "__name__" and isinstance(n.ctx, ast.Store) for n in ast.walk(tree)):
        return
    body: list[ast.stmt] = []
    for stmt in tree.body:
        body += stmt.orelse if _is_main_guard(stmt) else [stmt]
    tree.body = body


def triage(source: str) -> list[Finding]:
    """Static findings for a candidate source, sorted by line; [] when it does not parse. Never raises."""
    try:
        tree = ast.parse(source)
        drop_main_block(tree)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return []
    try:
        return scan_tree(tree)
    except Exception:  # a bug here must never block an evaluation; the dynamic checks still run
        return []
