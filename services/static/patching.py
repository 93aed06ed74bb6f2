"""Tampering with what the harness relies on: rebinding library, timer or harness attributes (hard), flipping
global numeric flags by assignment (hard), and faking tensors (subclasses, dispatch modes, instance overrides)."""

from __future__ import annotations

import ast

from services.static.names import const_str, targets, under
from services.static.process import check_environ_store
from services.static.rules import NUMERIC_FLAG_CHANGE, TENSOR_SUBCLASS, TIMER_PATCH
from services.static.scan import Scan

# Attribute namespaces that timing, synchronisation, profiling, launch hooks or the harness rely on.
PROTECTED = (
    "torch.cuda",
    "torch.Tensor",
    "torch._C",
    "torch.autograd",
    "torch.profiler",
    "torch.nn.Module",
    "torch.accelerator",
    "torch.Event",
    "time",
    "triton.testing",
    "triton.runtime",
    "triton.knobs",
    "triton.compiler",
    "builtins",
    "services",
)
# Config namespaces of torch.compile: rebinding them is not tampering (torch.compile is advisory).
CONFIG_NAMESPACES = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")
# Tensor attributes a checker calls on an output; rebinding one on an instance defers or fakes work (A3).
TENSOR_OVERRIDES = frozenset(
    {"double", "float", "detach", "cpu", "cuda", "clone", "to", "contiguous", "numpy", "tolist", "item", "data_ptr"}
    | {"__class__", "__eq__", "__sub__", "__getitem__", "__array__", "allclose", "isnan", "isfinite", "abs"}
)
TENSOR_BASES = ("torch.Tensor", "torch._tensor.Tensor")
DISPATCH_MODES = ("TorchDispatchMode", "TorchFunctionMode")
DISPATCH_HOOKS = ("__torch_function__", "__torch_dispatch__")


def check_patch(scan: Scan, node: ast.AST, q: str, shown: str) -> None:
    """A store into the attribute `q` of a module (`shown` is how the source wrote it)."""
    if q.startswith("torch.backends."):
        scan.add(NUMERIC_FLAG_CHANGE, node, f"{shown} changes global numerics (also the reference's); remove it.")
    elif under(q, PROTECTED) or (q.startswith(("torch.", "triton.")) and not under(q, CONFIG_NAMESPACES)):
        scan.add(TIMER_PATCH, node, f"{shown} rebinds a library, timer or harness symbol; remove it.")


def check_instance_override(scan: Scan, node: ast.AST, owner: ast.AST, attr: str | None) -> None:
    if attr in TENSOR_OVERRIDES and not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
        scan.add(
            TENSOR_SUBCLASS, node, f"Rebinding .{attr} on an object fakes tensor behaviour; return a plain tensor."
        )


def check_assignment(scan: Scan, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> None:
    raw = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
    for target in (t for r in raw for t in targets(r)):
        if isinstance(target, ast.Attribute):
            q = scan.names.resolve(target)
            if q:
                check_patch(scan, target, q, q)
            else:
                check_instance_override(scan, target, target.value, target.attr)
        elif isinstance(target, ast.Subscript):
            _check_subscript_store(scan, target)


def _check_subscript_store(scan: Scan, target: ast.Subscript) -> None:
    """`m.__dict__["x"] = ...` and `vars(m)["x"] = ...` patch module `m`; `os.environ[k] = ...` the environment."""
    value, names = target.value, scan.names
    owner = None
    if isinstance(value, ast.Attribute) and value.attr == "__dict__":
        owner = names.resolve(value.value)
    elif isinstance(value, ast.Call) and names.callee(value) == "builtins.vars" and value.args:
        owner = names.resolve(value.args[0])
    if owner:
        check_patch(scan, target, f"{owner}.{const_str(target.slice) or '*'}", f"{owner}.__dict__[...]")
    else:
        check_environ_store(scan, target)


def check_setattr_call(scan: Scan, node: ast.Call, fname: str) -> None:
    if len(node.args) < 2:
        return
    base = scan.names.resolve(node.args[0])
    if not base:
        check_instance_override(scan, node, node.args[0], const_str(node.args[1]))
        return
    attr = const_str(node.args[1]) or "*"
    check_patch(scan, node, f"{base}.{attr}", f"setattr({base}, {attr!r}, ...)")


def check_as_subclass(scan: Scan, node: ast.Call, method: str) -> None:
    scan.add(TENSOR_SUBCLASS, node, f".{method}() builds a tensor subclass; return a plain torch.Tensor.")


CALLS = {"builtins.setattr": check_setattr_call}
METHODS = {"as_subclass": check_as_subclass}


def check_make_subclass(scan: Scan, node: ast.Name | ast.Attribute) -> None:
    if isinstance(node, ast.Attribute) and node.attr == "_make_subclass":
        scan.add(TENSOR_SUBCLASS, node, "_make_subclass builds a tensor subclass; return a plain torch.Tensor.")


def check_class(scan: Scan, node: ast.ClassDef) -> None:
    for base in node.bases:
        q = scan.names.resolve(base) or ""
        if q in TENSOR_BASES or q.endswith(DISPATCH_MODES):
            scan.add(TENSOR_SUBCLASS, node, f"class {node.name}({q}) intercepts tensor ops; return plain tensors.")


def check_dispatch_hook(scan: Scan, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    if node.name in DISPATCH_HOOKS:
        scan.add(TENSOR_SUBCLASS, node, f"{node.name} intercepts tensor ops; return plain tensors.")
