"""PyTorch doing the work a kernel should do (advisory): compute reachable from `ModelNew.forward` through its
methods, helpers, submodules and bases, torch.compile, and exception handlers that fall back to PyTorch or
swallow a kernel's errors. At run time the launch hook and the output-dependence check decide."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from services.static.kernels import kernels
from services.static.rules import EXCEPTION_FALLBACK, TORCH_COMPUTE_IN_FORWARD, NameRule
from services.static.scan import Scan


def _words(text: str) -> list[str]:
    return text.split()


# PyTorch ops that do the work a kernel should do (as torch.X, torch.Tensor.X).
TORCH_HEAVY = frozenset(
    _words(
        """
    matmul mm bmm addmm addbmm baddbmm mv addmv addr dot vdot inner outer ger einsum tensordot kron
    chain_matmul cdist conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d
    convolution conv_tbc softmax log_softmax layer_norm group_norm batch_norm instance_norm rms_norm
    native_layer_norm native_batch_norm native_group_norm sum nansum mean nanmean prod std var
    std_mean var_mean norm cumsum cumprod logcumsumexp logsumexp amax amin max min argmax argmin
    sort argsort topk kthvalue median relu relu6 selu celu prelu rrelu hardtanh gelu silu mish
    softplus sigmoid tanh exp exp2 expm1 log log2 log10 log1p sqrt rsqrt erf erfc pow clamp clip
    add sub subtract mul multiply div divide true_divide maximum minimum addcmul addcdiv lerp
    dropout embedding bilinear lstm gru rnn_tanh rnn_relu cross cosine_similarity pairwise_distance
    avg_pool1d max_pool1d max_pool2d adaptive_avg_pool1d adaptive_max_pool1d pixel_shuffle compile
    """
    )
)
# The same as tensor methods (x.matmul(...)); a trailing "_" (in-place) is stripped first. Names
# that collide with everyday Python methods (set.add, logger.log, re.sub) are left out.
TENSOR_HEAVY_METHODS = frozenset(
    _words(
        """
    matmul mm bmm addmm addbmm baddbmm mv addmv dot softmax log_softmax sum nansum mean prod std var
    norm cumsum cumprod logsumexp amax amin max min argmax argmin sort argsort topk relu sigmoid tanh
    exp sqrt rsqrt erf clamp addcmul addcdiv lerp
    """
    )
)
TORCH_HEAVY_NAMESPACES = (
    "torch.linalg.",
    "torch.fft.",
    "torch.special.",
    "torch.ops.aten.",
    "torch.ops.prims.",
    "torch._C._nn.",
    "torch._C._VariableFunctions.",
    "torch._scaled_",
)
FUNCTIONAL_NOT_COMPUTE = frozenset({"pad"})
NN_NOT_COMPUTE = frozenset(
    {"Parameter", "ParameterList", "ParameterDict", "ModuleList", "ModuleDict", "Module", "Identity", "Buffer"}
)
BROAD_EXCEPTIONS = frozenset({"builtins.Exception", "builtins.BaseException", "builtins.RuntimeError"})

COMPILE_RULE = NameRule(
    TORCH_COMPUTE_IN_FORWARD,
    frozenset({"torch.compile", "torch._dynamo.optimize"}),
    "{q} generates the kernels instead of your Triton code.",
)


def _exception_names(scan: Scan, node: ast.AST | None) -> list[str]:
    if node is None:
        return ["builtins.BaseException"]
    if isinstance(node, ast.Tuple):
        return [n for e in node.elts for n in _exception_names(scan, e)]
    q = scan.names.resolve(node)
    if q is None and isinstance(node, ast.Name):
        q = f"builtins.{node.id}"
    return [q] if q else []


def check_try(scan: Scan, node: ast.Try | ast.TryStar) -> None:
    for h in node.handlers:
        shown = "bare except" if h.type is None else f"except {ast.unparse(h.type)}"
        cls = scan.enclosing.get(id(node))
        layers = members(scan, cls)[0] if cls else None
        compute = next(compute_ops(scan, h.body, layers), None)
        if compute:
            scan.add(
                EXCEPTION_FALLBACK,
                h,
                f"The {shown} handler falls back to {compute}; let kernel errors propagate.",
            )
            continue
        caught = _exception_names(scan, h.type)
        broad = any(q in BROAD_EXCEPTIONS or q.startswith(("torch.", "triton.")) for q in caught)
        silent = all(
            isinstance(s, ast.Pass | ast.Continue) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
            for s in h.body
        )
        if broad and silent:
            scan.add(EXCEPTION_FALLBACK, h, f"The {shown} handler silently swallows errors; let them propagate.")


def compute_name(scan: Scan, call: ast.Call, layers: dict[str, str] | None = None) -> str | None:
    """The display name of a PyTorch compute op called by `call`, else None.

    `layers` maps `self.<attr>` names of the enclosing class to the torch.nn layer bound to them.
    """
    names, func = scan.names, call.func
    q = names.resolve(func)
    if q:
        leaf = q.rsplit(".", 1)[-1]
        if q.startswith("torch.nn.functional."):
            return None if leaf in FUNCTIONAL_NOT_COMPUTE else q
        if q.startswith(TORCH_HEAVY_NAMESPACES):
            return q
        if q.count(".") == 1 and q.startswith("torch.") and leaf in TORCH_HEAVY:
            return q
        if q.startswith("torch.Tensor.") and q.count(".") == 2 and leaf.rstrip("_") in TENSOR_HEAVY_METHODS:
            return q
        return None
    if isinstance(func, ast.Attribute):
        if layers and isinstance(func.value, ast.Name) and func.value.id == "self" and func.attr in layers:
            return f"self.{func.attr} ({layers[func.attr]})"
        if func.attr.rstrip("_") in TENSOR_HEAVY_METHODS:
            return f".{func.attr}()"
    if isinstance(func, ast.Call):  # nn.Linear(a, b)(x)
        return layer_name(scan, func)
    return None


def layer_name(scan: Scan, ctor: ast.AST) -> str | None:
    if not isinstance(ctor, ast.Call):
        return None
    q = scan.names.resolve(ctor.func) or ""
    leaf = q.rsplit(".", 1)[-1]
    if q.startswith("torch.nn.") and leaf[:1].isupper() and leaf not in NN_NOT_COMPUTE:
        return q
    return None


def compute_ops(scan: Scan, body: Iterable[ast.AST], layers: dict[str, str] | None = None) -> Iterator[str]:
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Call):
                name = compute_name(scan, n, layers)
                if name:
                    yield name
            elif isinstance(n, ast.BinOp | ast.AugAssign) and isinstance(n.op, ast.MatMult):
                yield "the @ operator"


def mro(scan: Scan, cls: str, seen: set[str] | None = None) -> list[str]:
    """`cls` and its bases that are top-level classes of the candidate, depth first."""
    seen = seen if seen is not None else set()
    if cls in seen or cls not in scan.classes:
        return []
    seen.add(cls)
    out = [cls]
    for b in scan.classes[cls].bases:
        if isinstance(b, ast.Name):
            out += mro(scan, b.id, seen)
    return out


def lookup(scan: Scan, cls: str, meth: str, skip_self: bool = False) -> tuple[str, ast.AST] | None:
    for c in mro(scan, cls)[1 if skip_self else 0 :]:
        for n in scan.classes[c].body:
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == meth:
                return c, n
    return None


def members(scan: Scan, cls: str) -> tuple[dict[str, str], dict[str, str]]:
    """(`self.x = nn.Layer(...)` -> layer qualname, `self.x = LocalClass(...)` -> class name)."""
    layers: dict[str, str] = {}
    subs: dict[str, str] = {}
    for c in mro(scan, cls):
        for n in ast.walk(scan.classes[c]):
            if not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)):
                continue
            for t in n.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    layer = layer_name(scan, n.value)
                    if layer:
                        layers[t.attr] = layer
                    elif isinstance(n.value.func, ast.Name) and n.value.func.id in scan.classes:
                        subs[t.attr] = n.value.func.id
    return layers, subs


def check_forward(scan: Scan) -> None:
    """B7: PyTorch compute reachable from ModelNew.forward (methods, helpers, submodules, bases)."""
    if "ModelNew" not in scan.classes:
        return
    kernel_ids = {id(k) for k in kernels(scan)}
    funcs = {
        n.name: n
        for n in scan.tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and id(n) not in kernel_ids
    }
    queue: list[tuple[str | None, ast.AST]] = [
        found for meth in ("forward", "__call__") if (found := lookup(scan, "ModelNew", meth))
    ]
    seen: set[int] = set()
    while queue:
        cls, fn = queue.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        layers, subs = members(scan, cls) if cls else ({}, {})
        for n in ast.walk(fn):
            if isinstance(n, ast.BinOp | ast.AugAssign) and isinstance(n.op, ast.MatMult):
                scan.add(TORCH_COMPUTE_IN_FORWARD, n, "The @ operator runs a PyTorch matmul; use your Triton kernel.")
            if not isinstance(n, ast.Call):
                continue
            name = compute_name(scan, n, layers)
            if name:
                scan.add(TORCH_COMPUTE_IN_FORWARD, n, f"{name} in forward runs PyTorch; use your Triton kernel.")
            func = n.func
            if isinstance(func, ast.Name) and func.id in funcs:
                queue.append((None, funcs[func.id]))
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                owner = func.value.id
                if owner == "self" and cls:
                    found = lookup(scan, cls, func.attr)
                    if found:
                        queue.append(found)
                    elif func.attr in subs:
                        queue += [f for m in ("forward", "__call__") if (f := lookup(scan, subs[func.attr], m))]
                elif owner in scan.classes and func.attr in ("apply", "forward"):
                    found = lookup(scan, owner, "forward")
                    if found:
                        queue.append(found)
            elif (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Call)
                and isinstance(func.value.func, ast.Name)
                and func.value.func.id == "super"
                and cls
            ):
                found = lookup(scan, cls, func.attr, skip_self=True)
                if found:
                    queue.append(found)
