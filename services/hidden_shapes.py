"""Changed input sizes, for the problems and policies that ask a kernel to be correct beyond the published sizes.

KernelBench's contract is the problem's published sizes: a kernel specialised to them (`tl.arange(0, HEAD_DIM)`,
a grid or a block size computed for the published batch) is an optimisation, not a cheat, and the correctness
trials already draw fresh values at those sizes on every call, which defeats answers keyed to the shape. So by
default no size changes. A problem opts in to shape generality with a module-level `shape_general = True` in its
reference; a request or the server opts in with the `strict` policy.

Then the module-level integers (`batch_size = 16`, `dim = 16384`) that only `get_inputs()` reads (not
`get_init_inputs()`, so weights keep their shapes) change together, in two variants: about half, and small. A
changed size keeps the properties kernels legitimately rely on: a power of two stays a power of two, a multiple of
16 stays a multiple of 16 (an odd multiple, so alignment to 32 or 64 is not assumed); any other size becomes odd
(about half) and at most 3 (small). A size that cannot shrink under its rule (16) stays. A variant the reference
itself cannot run is skipped by the evaluator: it is the problem's constraint, not the candidate's fault. The
variants are derived in the parent from the reference source, the same for every candidate of a problem, and
named in the result and the feedback.
"""

from __future__ import annotations

import ast

from services.parsing import parse

OPT_IN = "shape_general"
POLICIES = frozenset({"strict"})  # policies that require shape generality whatever the problem says


def _module_values(tree: ast.Module) -> dict[str, object]:
    found: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            found[target.id] = value.value
    return found


def _names_read(tree: ast.Module, function: str) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return set()


def _parse(reference_source: str) -> ast.Module | None:
    try:
        return parse(reference_source)
    except SyntaxError:
        return None


def declares_shape_general(reference_source: str) -> bool:
    """Whether the reference sets `shape_general = True` at module level."""
    tree = _parse(reference_source)
    return tree is not None and _module_values(tree).get(OPT_IN) is True


def shape_generality(reference_source: str, policy: str) -> str | None:
    """Why candidates must also be correct on changed sizes, for the feedback; None: the published sizes only."""
    if policy in POLICIES:
        return f"the `{policy}` policy asks for kernels correct on any sizes"
    if declares_shape_general(reference_source):
        return "the problem sets `shape_general = True`: kernels must be correct on any sizes"
    return None


def _is_pow2(v: int) -> bool:
    return v & (v - 1) == 0


def half(v: int) -> int:
    """About half of a size, keeping a power of two or a multiple of 16; otherwise odd."""
    if _is_pow2(v):
        return max(16, v // 2) if v % 16 == 0 else max(1, v // 2)
    if v % 16 == 0:
        return ((v // 32) | 1) * 16
    return max(1, (v // 2) | 1)


def small(v: int) -> int:
    """A small size of the same kind: 16 for multiples of 16, 2 for smaller powers of two, else at most 3."""
    if v % 16 == 0:
        return 16
    if _is_pow2(v):
        return min(v, 2)
    return min(v, 3)


def shape_variants(reference_source: str) -> list[dict[str, int]]:
    """Replacement values for the problem's input sizes, one dict per variant (empty: nothing to vary)."""
    tree = _parse(reference_source)
    if tree is None:
        return []
    values = _module_values(tree)
    read = _names_read(tree, "get_inputs") - _names_read(tree, "get_init_inputs")
    sizes = [name for name, v in values.items() if name in read and type(v) is int and v >= 2]  # source order
    variants: list[dict[str, int]] = []
    for change in (half, small):
        variant = {name: change(values[name]) for name in sizes}
        if any(variant[name] != values[name] for name in sizes) and variant not in variants:
            variants.append(variant)
    return variants


def describe(sizes: dict[str, int]) -> str:
    """`rows=32, cols=501`: how a variant is named in checks and feedback."""
    return ", ".join(f"{name}={value}" for name, value in sizes.items())
