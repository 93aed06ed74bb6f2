"""Hidden sizes for the correctness check: a kernel must be right on sizes other than the published ones.

A KernelBench problem sets its sizes as module-level integers (`batch_size = 16`, `dim = 16384`) read by
`get_inputs()`. The sizes that only `get_inputs()` reads (not `get_init_inputs()`, so weights keep their
shapes) are replaced by smaller, unaligned values: about half, made odd, and tiny (at most 3). A variant the
reference itself cannot run is skipped by the evaluator; it is the problem's constraint, not the
candidate's fault. The variants are derived in the parent from the reference source and are the same for
every candidate of a problem, but they are never shown to it.
"""

from __future__ import annotations

import ast


def _module_ints(tree: ast.Module) -> dict[str, int]:
    found: dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant) and type(value.value) is int:
            found[target.id] = value.value
    return found


def _names_read(tree: ast.Module, function: str) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return set()


def shape_variants(reference_source: str) -> list[dict[str, int]]:
    """Replacement values for the problem's input sizes, one dict per variant (empty: nothing to vary)."""
    try:
        tree = ast.parse(reference_source)
    except SyntaxError:
        return []
    ints = _module_ints(tree)
    sizes = sorted(
        name
        for name in _names_read(tree, "get_inputs") - _names_read(tree, "get_init_inputs")
        if ints.get(name, 0) >= 2
    )
    variants: list[dict[str, int]] = []
    for shrink in (lambda v: max(1, (v // 2) | 1), lambda v: min(v, 3)):
        variant = {name: shrink(ints[name]) for name in sizes}
        if any(variant[name] != ints[name] for name in sizes) and variant not in variants:
            variants.append(variant)
    return variants
