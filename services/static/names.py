"""Static triage of a candidate source before anything of it executes.

The security boundary of KernelGym is dynamic: the candidate runs in a child process whose timers,
threads, streams, outputs and library coverage are checked while it runs. Static scanning is a
pattern chase (an obfuscated source slips past any list of patterns), so almost everything here is
*advisory*: a finding is reported to the agent and recorded, and the dynamic checks decide.

A short list of codes is *hard* (``HARD_CODES``): the evaluation is rejected without running.
These are constructs a legitimate Triton kernel never needs, so rejecting them costs an honest
candidate nothing: no ``@triton.jit`` kernel at all, importing process/network/FFI modules,
spawning or exiting processes, rebinding timer/sync/harness/library symbols, installing packages,
and flipping global numeric flags that would also change the reference.

The analysis is AST-based and uses only the standard library. Names are resolved through the
candidate's imports and simple aliases (``import torch.cuda as tc``, ``ev = torch.cuda.Event``,
``getattr(torch, "cuda")``, ``__import__("time")``), not through data flow. ``triage`` never raises;
a source that does not parse yields no findings (the dynamic load reports the syntax error). An
``if __name__ == "__main__":`` block is ignored: the loader imports the candidate under another module
name, so it never runs (unless the source rebinds ``__name__``, in which case it is checked).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["HARD_CODES", "Finding", "triage"]


@dataclass(frozen=True)
class Finding:
    code: str  # stable machine-readable, snake_case, e.g. "forbidden_import"
    line: int  # 1-based line in the candidate source (0 if not applicable)
    detail: str  # one short human sentence an LLM agent can act on, naming the construct
    hard: bool  # True: the evaluation is rejected without running


HARD_CODES: frozenset[str] = frozenset(
    {
        "no_triton_kernel",
        "forbidden_import",
        "process_spawn",
        "timer_patch",
        "package_install",
        "numeric_flag_change",
    }
)

# ----------------------------------------------------------------------------------------------
# Tables
# ----------------------------------------------------------------------------------------------

# Modules whose import alone is a hard reject: processes, sockets and HTTP, FFI, package managers.
_FORBIDDEN_MODULES = (
    "subprocess",
    "_posixsubprocess",
    "pty",
    "socket",
    "_socket",
    "ctypes",
    "_ctypes",
    "cffi",
    "multiprocessing",
    "_multiprocessing",
    "torch.multiprocessing",
    "pip",
    "ensurepip",
    "urllib",
    "urllib3",
    "http",
    "requests",
    "httpx",
    "aiohttp",
    "ftplib",
    "smtplib",
    "telnetlib",
    "xmlrpc",
    "asyncio.subprocess",
)
_THREAD_MODULES = ("threading", "_thread", "concurrent.futures")

_PROCESS_NAMES = frozenset(
    {
        "os.system",
        "os.popen",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "os._exit",
        "os.abort",
        "os.register_at_fork",
        "sys.exit",
        "atexit.register",
        "asyncio.create_subprocess_exec",
        "asyncio.create_subprocess_shell",
        "pty.spawn",
        "pty.fork",
    }
)
_PROCESS_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn")

# Attribute namespaces that timing, synchronisation, profiling, launch hooks or the harness rely on.
_PROTECTED = (
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
_CONFIG_NAMESPACES = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")

_NUMERIC_CALLS = frozenset(
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

_PACKAGE_INSTALL = re.compile(r"\b(?:pip3?|conda|mamba|micromamba|uv\s+pip)\s+install\b|\bensurepip\b", re.I)


def _words(text: str) -> list[str]:
    return text.split()


# PyTorch ops that do the work a kernel should do (as torch.X, torch.Tensor.X).
_TORCH_HEAVY = frozenset(
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
_TENSOR_HEAVY_METHODS = frozenset(
    _words(
        """
    matmul mm bmm addmm addbmm baddbmm mv addmv dot softmax log_softmax sum nansum mean prod std var
    norm cumsum cumprod logsumexp amax amin max min argmax argmin sort argsort topk relu sigmoid tanh
    exp sqrt rsqrt erf clamp addcmul addcdiv lerp
    """
    )
)
_TORCH_HEAVY_NAMESPACES = (
    "torch.linalg.",
    "torch.fft.",
    "torch.special.",
    "torch.ops.aten.",
    "torch.ops.prims.",
    "torch._C._nn.",
    "torch._C._VariableFunctions.",
    "torch._scaled_",
)
_FUNCTIONAL_NOT_COMPUTE = frozenset({"pad"})
_NN_NOT_COMPUTE = frozenset(
    {"Parameter", "ParameterList", "ParameterDict", "ModuleList", "ModuleDict", "Module", "Identity", "Buffer"}
)

_SIDE_STREAM = frozenset(
    {
        "torch.cuda.Stream",
        "torch.cuda.stream",
        "torch.cuda.set_stream",
        "torch.cuda.ExternalStream",
        "torch.cuda.StreamContext",
        "torch.cuda.streams.Stream",
        "torch.cuda.streams.ExternalStream",
        "torch.Stream",
    }
)
_CUDA_GRAPH = frozenset(
    {
        "torch.cuda.CUDAGraph",
        "torch.cuda.graph",
        "torch.cuda.make_graphed_callables",
        "torch.cuda.graph_pool_handle",
        "torch.cuda.graphs.CUDAGraph",
        "torch.cuda.graphs.graph",
        "torch.cuda.graphs.make_graphed_callables",
    }
)
_FRAME_NAMES = frozenset(
    {
        "sys._getframe",
        "sys._current_frames",
        "sys.modules",
        "inspect.currentframe",
        "inspect.stack",
        "inspect.getouterframes",
        "inspect.getinnerframes",
        "inspect.trace",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
    }
)
_FRAME_ATTRS = frozenset({"f_back", "f_locals", "f_globals", "tb_frame", "gi_frame", "cr_frame", "__globals__"})
_DYNAMIC_NAMES = frozenset(
    {"importlib.reload", "types.FunctionType", "types.CodeType", "marshal.loads", "pickle.loads", "dill.loads"}
)
_FILE_NAMES = frozenset(
    {
        "os.remove",
        "os.unlink",
        "os.rename",
        "os.renames",
        "os.replace",
        "os.makedirs",
        "os.mkdir",
        "os.rmdir",
        "os.removedirs",
        "os.symlink",
        "os.link",
        "os.truncate",
        "os.open",
        "os.mkfifo",
        "torch.save",
        "torch.load",
        "pickle.dump",
        "pickle.load",
        "numpy.save",
        "numpy.savez",
        "numpy.load",
    }
)
_FILE_METHODS = frozenset(
    {"write_text", "write_bytes", "touch", "unlink", "rmdir", "symlink_to", "hardlink_to", "tofile"}
)
_AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast"})
_LOW_DTYPES = frozenset({"float16", "half", "bfloat16"})
_THREAD_NAMES = frozenset({"torch.jit.fork", "torch.jit._fork"})
_ENV_NAMES = frozenset({"os.putenv", "os.unsetenv"})
_ENV_METHODS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"})
# Tensor attributes a checker calls on an output; rebinding one on an instance defers or fakes work (A3).
_TENSOR_OVERRIDES = frozenset(
    {"double", "float", "detach", "cpu", "cuda", "clone", "to", "contiguous", "numpy", "tolist", "item", "data_ptr"}
    | {"__class__", "__eq__", "__sub__", "__getitem__", "__array__", "allclose", "isnan", "isfinite", "abs"}
)
_BROAD_EXCEPTIONS = frozenset({"builtins.Exception", "builtins.BaseException", "builtins.RuntimeError"})


def _under(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _targets(node: ast.AST) -> Iterator[ast.AST]:
    """Flatten assignment targets (tuples, lists, starred)."""
    if isinstance(node, ast.Tuple | ast.List):
        for elt in node.elts:
            yield from _targets(elt)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)
    else:
        yield node


# ----------------------------------------------------------------------------------------------
# Name resolution
# ----------------------------------------------------------------------------------------------


class _Names:
    """Maps local names to dotted qualnames through imports and simple aliases (one flat scope)."""

    def __init__(self, tree: ast.Module) -> None:
        self.alias: dict[str, str] = {}
        self.star: set[str] = set()
        self.bound: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.alias[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.alias[top] = top
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                for a in node.names:
                    if a.name == "*":
                        self.star.add(module)
                    else:
                        self.alias[a.asname or a.name] = f"{module}.{a.name}" if module else a.name
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.bound.add(node.name)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.bound.add(node.id)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.bound.add(node.name)
        if "__builtins__" not in self.alias and "__builtins__" not in self.bound:
            self.alias["__builtins__"] = "builtins"
        # Simple aliases: `tc = torch.cuda`, `ev = getattr(torch.cuda, "Event")`, `t = __import__("time")`.
        pairs = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                pairs += [(t, node.value) for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and isinstance(node.target, ast.Name) and node.value:
                pairs.append((node.target, node.value))
        for _ in range(3):
            changed = False
            for target, value in pairs:
                q = self.resolve(value)
                if q and self.alias.get(target.id) != q:
                    self.alias[target.id] = q
                    changed = True
            if not changed:
                break

    def resolve(self, node: ast.AST | None) -> str | None:
        """The dotted qualname of a name, attribute chain or constant-argument lookup, else None."""
        if isinstance(node, ast.Name):
            q = self.alias.get(node.id)
        elif isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            q = f"{base}.{node.attr}" if base else None
        elif isinstance(node, ast.Call):
            q = self._resolve_call(node)
        elif isinstance(node, ast.Subscript):
            q = self._resolve_subscript(node)
        else:
            q = None
        if q and q.startswith(("posix.", "nt.")):
            q = "os." + q.split(".", 1)[1]
        return q

    def _resolve_subscript(self, node: ast.Subscript) -> str | None:
        """sys.modules["m"], __builtins__["exec"], m.__dict__["x"], vars(m)["x"] with a constant key."""
        key = _const_str(node.slice)
        if key is None:
            return None
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "__dict__":
            base = self.resolve(value.value)
        elif isinstance(value, ast.Call) and self.callee(value) == "builtins.vars" and value.args:
            base = self.resolve(value.args[0])
        else:
            base = self.resolve(value)
            if base == "sys.modules":
                return key
            if base != "builtins":
                return None
        return f"{base}.{key}" if base else None

    def _resolve_call(self, node: ast.Call) -> str | None:
        fname = self.callee(node)
        arg0 = node.args[0] if node.args else None
        if fname == "builtins.getattr" and len(node.args) >= 2:
            base, attr = self.resolve(arg0), _const_str(node.args[1])
            return f"{base}.{attr}" if base and attr else None
        if fname == "builtins.__import__" and _const_str(arg0):
            return _const_str(arg0).split(".")[0]
        if fname == "importlib.import_module" and _const_str(arg0):
            return _const_str(arg0)
        return None

    def callee(self, call: ast.Call) -> str | None:
        """Qualname of what a call calls; an unshadowed bare name is reported as builtins.<name>."""
        func = call.func
        q = self.resolve(func)
        if q:
            return q
        if isinstance(func, ast.Name) and func.id not in self.bound:
            return f"builtins.{func.id}"
        return None

    def is_module_like(self, node: ast.AST) -> bool:
        """True when `node` resolves through the imports (so `node.x(...)` is not a tensor method)."""
        return self.resolve(node) is not None


# ----------------------------------------------------------------------------------------------
# The checker
# ----------------------------------------------------------------------------------------------


class _Triage:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.names = _Names(tree)
        self.found: dict[tuple[str, int], Finding] = {}
        self.docstrings = self._docstring_ids(tree)
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        self.enclosing = {id(sub): name for name, c in self.classes.items() for sub in ast.walk(c)}

    # -- plumbing -------------------------------------------------------------------------------

    def add(self, code: str, where: ast.AST | int, detail: str) -> None:
        line = where if isinstance(where, int) else getattr(where, "lineno", 0)
        key = (code, line)
        if key not in self.found:
            self.found[key] = Finding(code=code, line=line, detail=detail, hard=code in HARD_CODES)

    @staticmethod
    def _docstring_ids(tree: ast.Module) -> set[int]:
        ids = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
                first = node.body[0]
                if isinstance(first, ast.Expr) and _const_str(first.value) is not None:
                    ids.add(id(first.value))
        return ids

    def results(self) -> list[Finding]:
        return sorted(self.found.values(), key=lambda f: (f.line, f.code))

    # -- driver ---------------------------------------------------------------------------------

    def run(self) -> list[Finding]:
        self.check_kernel_present()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                self.check_import(node)
            elif isinstance(node, ast.Call):
                self.check_call(node)
            elif isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Load):
                self.check_reference(node)
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
                self.check_assignment(node)
            elif isinstance(node, ast.Constant):
                self.check_constant(node)
            elif isinstance(node, ast.Raise):
                self.check_raise(node)
            elif isinstance(node, ast.Try | ast.TryStar):
                self.check_try(node)
            elif isinstance(node, ast.ClassDef):
                self.check_class(node)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.check_function(node)
        self.check_forward()
        return self.results()

    # -- no_triton_kernel -----------------------------------------------------------------------

    def _is_jit(self, node: ast.AST) -> bool:
        target = node.func if isinstance(node, ast.Call) else node
        q = self.names.resolve(target)
        if q is None and isinstance(target, ast.Name) and target.id == "jit":
            return "triton" in self.names.star
        return bool(q) and q.startswith("triton.") and q.rsplit(".", 1)[-1] == "jit"

    def kernels(self) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        return [
            n
            for n in ast.walk(self.tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and any(self._is_jit(d) for d in n.decorator_list)
        ]

    def check_kernel_present(self) -> None:
        if self.kernels():
            return
        # `kernel = triton.jit(fn)` also defines a kernel.
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and node.args and self._is_jit(node.func):
                return
        self.add(
            "no_triton_kernel",
            0,
            "No function is decorated with @triton.jit; the computation must be written as a Triton kernel.",
        )

    # -- imports --------------------------------------------------------------------------------

    def _check_module(self, node: ast.AST, module: str) -> None:
        if _under(module, _FORBIDDEN_MODULES):
            self.add("forbidden_import", node, f"Importing {module} is not allowed in a kernel submission; remove it.")
        elif module in _PROCESS_NAMES or module.startswith(_PROCESS_PREFIXES):
            self.add("forbidden_import", node, f"Importing {module} (process control) is not allowed; remove it.")
        elif _under(module, _THREAD_MODULES):
            self.add("threading", node, f"Importing {module}: work must finish on the calling thread before return.")
        elif module == "__main__" or _under(module, ("services",)):
            self.add("frame_introspection", node, f"Importing {module} reaches into the harness; remove it.")

    def check_import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                self._check_module(node, a.name)
            return
        if node.level:
            return
        module = node.module or ""
        self._check_module(node, module)
        for a in node.names:  # `from os import system`, `from concurrent import futures`
            self._check_module(node, f"{module}.{a.name}")

    # -- calls ----------------------------------------------------------------------------------

    def check_call(self, node: ast.Call) -> None:
        names = self.names
        fname = names.callee(node)
        func = node.func
        arg0 = node.args[0] if node.args else None
        method = func.attr if isinstance(func, ast.Attribute) else None
        on_value = method is not None and not names.is_module_like(func.value)

        if fname in ("builtins.__import__", "importlib.import_module"):
            mod = _const_str(arg0)
            if mod is None:
                self.add(
                    "dynamic_code", node, f"{fname.split('.')[-1]}() with a computed module name; import normally."
                )
            else:
                self._check_module(node, mod)
        elif fname in ("builtins.exit", "builtins.quit"):
            self.add("process_spawn", node, f"{fname[9:]}() ends the process; a submission must return normally.")
        elif fname in ("builtins.exec", "builtins.eval", "builtins.compile"):
            self.add("dynamic_code", node, f"{fname[9:]}() runs generated code; write the code directly.")
        elif fname == "builtins.setattr" and len(node.args) >= 2:
            self._check_setattr(node)
        elif fname == "builtins.getattr":
            q = names.resolve(node)
            if q:
                self._check_qualname(node, q)
        elif fname in _NUMERIC_CALLS or (
            fname
            and fname.startswith("torch.backends.")
            and fname.rsplit(".", 1)[-1].startswith(("enable_", "preferred_", "set_"))
        ):
            self.add(
                "numeric_flag_change", node, f"{fname}() changes global numerics (also the reference's); remove it."
            )
        elif fname == "builtins.vars" and arg0 is not None and names.is_module_like(arg0):
            self.add("frame_introspection", node, f"vars({names.resolve(arg0)}) reads another module's namespace.")
        elif fname == "builtins.open" or fname == "io.open":
            self._check_open(node)
        elif fname == "triton.language.dot":
            self._check_dot(node)
        elif fname == "triton.language.cast" and len(node.args) >= 2:
            self._check_cast(node, node.args[1:2])
        elif fname == "torch.compile":
            mode = _const_str(next((k.value for k in node.keywords if k.arg == "mode"), None))
            if mode in ("reduce-overhead", "max-autotune"):
                self.add("cuda_graph", node, f'torch.compile(mode="{mode}") replays CUDA graphs; remove it.')
        elif on_value and method in ("half", "bfloat16"):
            self.add("precision_downgrade", node, f".{method}() downcasts; compute in the problem's dtype.")
        elif on_value and method in ("to", "type"):
            self._check_cast(node, [*node.args, *(k.value for k in node.keywords if k.arg == "dtype")])
        elif on_value and method == "wait_stream":
            self.add("side_stream", node, ".wait_stream() implies work on a side stream; use the current stream.")
        elif on_value and method == "as_subclass":
            self.add("tensor_subclass", node, f".{method}() builds a tensor subclass; return a plain torch.Tensor.")
        elif on_value and method in _FILE_METHODS:
            self.add("file_io", node, f".{method}() touches the filesystem; kernels must not persist state in files.")
        elif method in _ENV_METHODS and names.resolve(func.value) == "os.environ":
            self.add("env_mutation", node, f"os.environ.{method}() changes the environment; remove it.")

    def _check_setattr(self, node: ast.Call) -> None:
        base = self.names.resolve(node.args[0])
        if not base:
            self._check_instance_override(node, node.args[0], _const_str(node.args[1]))
            return
        attr = _const_str(node.args[1]) or "*"
        self._check_patch(node, f"{base}.{attr}", f"setattr({base}, {attr!r}, ...)")

    def _check_open(self, node: ast.Call) -> None:
        path = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "file"), None)
        mode_node = (
            node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
        )
        mode = _const_str(mode_node) if mode_node is not None else "r"
        writes = mode is None or any(c in mode for c in "wax+")
        const_path = _const_str(path)
        if const_path is not None and const_path.startswith(("/", "~")):
            self.add("file_io", node, f"open({const_path!r}) uses an absolute path; kernels must not touch files.")
        elif writes and const_path is None:
            self.add(
                "file_io", node, "open() for writing with a computed path; kernels must not persist state in files."
            )

    def _check_dot(self, node: ast.Call) -> None:
        kw = {k.arg: k.value for k in node.keywords}
        precision = kw.get("input_precision", node.args[3] if len(node.args) > 3 else None)
        tf32 = kw.get("allow_tf32", node.args[4] if len(node.args) > 4 else None)
        if isinstance(tf32, ast.Constant) and tf32.value is True:
            self.add("precision_downgrade", node, "tl.dot(allow_tf32=True) rounds fp32 inputs to TF32.")
        elif _const_str(precision) in ("tf32", "tf32x3"):
            self.add(
                "precision_downgrade", node, f'tl.dot(input_precision="{_const_str(precision)}") rounds fp32 to TF32.'
            )
        elif precision is None and tf32 is None:
            self.add(
                "precision_downgrade",
                node,
                'tl.dot defaults to TF32 for fp32 inputs; pass input_precision="ieee" if the problem is fp32.',
            )

    def _check_cast(self, node: ast.Call, dtypes: Iterable[ast.AST]) -> None:
        for d in dtypes:
            q = self.names.resolve(d)
            if not q or not q.startswith(("torch.", "triton.language.")):
                continue
            leaf = q.rsplit(".", 1)[-1]
            if leaf in _LOW_DTYPES or leaf.startswith("float8"):
                self.add("precision_downgrade", node, f"Cast to {q} downcasts; compute in the problem's dtype.")
                return

    # -- references -----------------------------------------------------------------------------

    def check_reference(self, node: ast.Name | ast.Attribute) -> None:
        if isinstance(node, ast.Attribute) and node.attr in _FRAME_ATTRS:
            self.add("frame_introspection", node, f".{node.attr} walks frames or function globals; remove it.")
        if isinstance(node, ast.Attribute) and node.attr == "_make_subclass":
            self.add("tensor_subclass", node, "_make_subclass builds a tensor subclass; return a plain torch.Tensor.")
        if isinstance(node, ast.Attribute) and node.attr == "__dict__" and self.names.is_module_like(node.value):
            q = self.names.resolve(node.value)
            self.add("frame_introspection", node, f"{q}.__dict__ reads another module's namespace.")
        q = self.names.resolve(node)
        if q:
            self._check_qualname(node, q)

    def _check_qualname(self, node: ast.AST, q: str) -> None:
        if q in _PROCESS_NAMES or q.startswith(_PROCESS_PREFIXES):
            self.add("process_spawn", node, f"{q} starts, signals or ends processes (or hooks exit); remove it.")
        elif q in _SIDE_STREAM:
            self.add("side_stream", node, f"{q}: launch on the current stream so the timer sees the work.")
        elif q in _CUDA_GRAPH:
            self.add("cuda_graph", node, f"{q}: the harness times graphs itself; launch the kernel directly.")
        elif q in _FRAME_NAMES:
            self.add("frame_introspection", node, f"{q} inspects the interpreter or harness state; remove it.")
        elif q in _DYNAMIC_NAMES:
            self.add("dynamic_code", node, f"{q} loads or builds code at run time; write the code directly.")
        elif q in _FILE_NAMES or (q.startswith("shutil.")):
            self.add("file_io", node, f"{q} touches the filesystem; kernels must not persist state in files.")
        elif q in _AUTOCAST:
            self.add("precision_downgrade", node, f"{q} lowers matmul/conv precision; compute in the problem's dtype.")
        elif q in _THREAD_NAMES:
            self.add("threading", node, f"{q} runs work on another thread; finish work before returning.")
        elif q in _ENV_NAMES:
            self.add("env_mutation", node, f"{q} changes the environment; remove it.")
        elif q in ("torch.compile", "torch._dynamo.optimize"):
            self.add("torch_compute_in_forward", node, f"{q} generates the kernels instead of your Triton code.")

    # -- assignments ----------------------------------------------------------------------------

    def check_assignment(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> None:
        raw = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        for target in (t for r in raw for t in _targets(r)):
            if isinstance(target, ast.Attribute):
                q = self.names.resolve(target)
                if q:
                    self._check_patch(target, q, q)
                else:
                    self._check_instance_override(target, target.value, target.attr)
            elif isinstance(target, ast.Subscript):
                self._check_subscript_store(target)

    def _check_patch(self, node: ast.AST, q: str, shown: str) -> None:
        if q.startswith("torch.backends."):
            self.add("numeric_flag_change", node, f"{shown} changes global numerics (also the reference's); remove it.")
        elif _under(q, _PROTECTED) or (q.startswith(("torch.", "triton.")) and not _under(q, _CONFIG_NAMESPACES)):
            self.add("timer_patch", node, f"{shown} rebinds a library, timer or harness symbol; remove it.")

    def _check_instance_override(self, node: ast.AST, owner: ast.AST, attr: str | None) -> None:
        if attr in _TENSOR_OVERRIDES and not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
            self.add(
                "tensor_subclass",
                node,
                f"Rebinding .{attr} on an object fakes tensor behaviour; return a plain tensor.",
            )

    def _check_subscript_store(self, target: ast.Subscript) -> None:
        value, names = target.value, self.names
        owner = None
        if isinstance(value, ast.Attribute) and value.attr == "__dict__":
            owner = names.resolve(value.value)
        elif isinstance(value, ast.Call) and names.callee(value) == "builtins.vars" and value.args:
            owner = names.resolve(value.args[0])
        if owner:
            self._check_patch(target, f"{owner}.{_const_str(target.slice) or '*'}", f"{owner}.__dict__[...]")
        elif names.resolve(value) == "os.environ":
            self.add("env_mutation", target, "Writing os.environ changes the environment; remove it.")

    # -- constants, raise -----------------------------------------------------------------------

    def check_constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and id(node) not in self.docstrings:
            m = _PACKAGE_INSTALL.search(node.value)
            if m:
                self.add(
                    "package_install", node, f"String {m.group(0)!r}: installing packages at run time is not allowed."
                )
            if "/dev/shm" in node.value:
                self.add("file_io", node, "/dev/shm path: kernels must not persist state across calls or runs.")

    def check_raise(self, node: ast.Raise) -> None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if isinstance(exc, ast.Name) and exc.id == "SystemExit" and exc.id not in self.names.bound:
            self.add("process_spawn", node, "raise SystemExit ends the process; a submission must return normally.")

    # -- try/except -----------------------------------------------------------------------------

    def _exception_names(self, node: ast.AST | None) -> list[str]:
        if node is None:
            return ["builtins.BaseException"]
        if isinstance(node, ast.Tuple):
            return [n for e in node.elts for n in self._exception_names(e)]
        q = self.names.resolve(node)
        if q is None and isinstance(node, ast.Name):
            q = f"builtins.{node.id}"
        return [q] if q else []

    def check_try(self, node: ast.Try | ast.TryStar) -> None:
        for h in node.handlers:
            shown = "bare except" if h.type is None else f"except {ast.unparse(h.type)}"
            cls = self.enclosing.get(id(node))
            layers = self.members(cls)[0] if cls else None
            compute = next(self._compute_ops(h.body, layers), None)
            if compute:
                self.add(
                    "exception_fallback",
                    h,
                    f"The {shown} handler falls back to {compute}; let kernel errors propagate.",
                )
                continue
            caught = self._exception_names(h.type)
            broad = any(q in _BROAD_EXCEPTIONS or q.startswith(("torch.", "triton.")) for q in caught)
            silent = all(
                isinstance(s, ast.Pass | ast.Continue)
                or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
                for s in h.body
            )
            if broad and silent:
                self.add("exception_fallback", h, f"The {shown} handler silently swallows errors; let them propagate.")

    # -- classes and functions ------------------------------------------------------------------

    def check_class(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            q = self.names.resolve(base) or ""
            if q in ("torch.Tensor", "torch._tensor.Tensor") or q.endswith(("TorchDispatchMode", "TorchFunctionMode")):
                self.add(
                    "tensor_subclass", node, f"class {node.name}({q}) intercepts tensor ops; return plain tensors."
                )

    def check_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.add("tensor_subclass", node, f"{node.name} intercepts tensor ops; return plain tensors.")
        if not any(self._is_jit(d) for d in node.decorator_list):
            self._check_result_cache(node)

    def _check_result_cache(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """A5, heuristically: data_ptr()/id()/hash() values used as a container key, or a memoised launcher."""
        names = self.names
        for dec in fn.decorator_list:
            q = names.resolve(dec.func if isinstance(dec, ast.Call) else dec)
            if q in ("functools.lru_cache", "functools.cache"):
                tensor_arg = any(names.resolve(a.annotation) == "torch.Tensor" for a in fn.args.args if a.annotation)
                launches = any(
                    isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) for s in fn.body for n in ast.walk(s)
                )
                if tensor_arg or launches or next(self._compute_ops(fn.body), None):
                    self.add("result_cache", dec, f"{q} on {fn.name}() memoises results across calls; recompute them.")

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
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    tainted |= {t.id for r in targets for t in _targets(r) if isinstance(t, ast.Name)}

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
            self.add(
                "result_cache",
                min(uses),
                "A container keyed on data_ptr()/id()/hash() replays results across calls; recompute every call.",
            )

    # -- torch compute in forward ---------------------------------------------------------------

    def compute_name(self, call: ast.Call, layers: dict[str, str] | None = None) -> str | None:
        """The display name of a PyTorch compute op called by `call`, else None.

        `layers` maps `self.<attr>` names of the enclosing class to the torch.nn layer bound to them.
        """
        names, func = self.names, call.func
        q = names.resolve(func)
        if q:
            leaf = q.rsplit(".", 1)[-1]
            if q.startswith("torch.nn.functional."):
                return None if leaf in _FUNCTIONAL_NOT_COMPUTE else q
            if q.startswith(_TORCH_HEAVY_NAMESPACES):
                return q
            if q.count(".") == 1 and q.startswith("torch.") and leaf in _TORCH_HEAVY:
                return q
            if q.startswith("torch.Tensor.") and q.count(".") == 2 and leaf.rstrip("_") in _TENSOR_HEAVY_METHODS:
                return q
            return None
        if isinstance(func, ast.Attribute):
            if layers and isinstance(func.value, ast.Name) and func.value.id == "self" and func.attr in layers:
                return f"self.{func.attr} ({layers[func.attr]})"
            if func.attr.rstrip("_") in _TENSOR_HEAVY_METHODS:
                return f".{func.attr}()"
        if isinstance(func, ast.Call):  # nn.Linear(a, b)(x)
            return self.layer_name(func)
        return None

    def layer_name(self, ctor: ast.AST) -> str | None:
        if not isinstance(ctor, ast.Call):
            return None
        q = self.names.resolve(ctor.func) or ""
        leaf = q.rsplit(".", 1)[-1]
        if q.startswith("torch.nn.") and leaf[:1].isupper() and leaf not in _NN_NOT_COMPUTE:
            return q
        return None

    def _compute_ops(self, body: Iterable[ast.AST], layers: dict[str, str] | None = None) -> Iterator[str]:
        for stmt in body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Call):
                    name = self.compute_name(n, layers)
                    if name:
                        yield name
                elif isinstance(n, ast.BinOp | ast.AugAssign) and isinstance(n.op, ast.MatMult):
                    yield "the @ operator"

    # -- local classes --------------------------------------------------------------------------

    def mro(self, cls: str, seen: set[str] | None = None) -> list[str]:
        """`cls` and its bases that are top-level classes of the candidate, depth first."""
        seen = seen if seen is not None else set()
        if cls in seen or cls not in self.classes:
            return []
        seen.add(cls)
        out = [cls]
        for b in self.classes[cls].bases:
            if isinstance(b, ast.Name):
                out += self.mro(b.id, seen)
        return out

    def lookup(self, cls: str, meth: str, skip_self: bool = False) -> tuple[str, ast.AST] | None:
        for c in self.mro(cls)[1 if skip_self else 0 :]:
            for n in self.classes[c].body:
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == meth:
                    return c, n
        return None

    def members(self, cls: str) -> tuple[dict[str, str], dict[str, str]]:
        """(`self.x = nn.Layer(...)` -> layer qualname, `self.x = LocalClass(...)` -> class name)."""
        layers: dict[str, str] = {}
        subs: dict[str, str] = {}
        for c in self.mro(cls):
            for n in ast.walk(self.classes[c]):
                if not (isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)):
                    continue
                for t in n.targets:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        layer = self.layer_name(n.value)
                        if layer:
                            layers[t.attr] = layer
                        elif isinstance(n.value.func, ast.Name) and n.value.func.id in self.classes:
                            subs[t.attr] = n.value.func.id
        return layers, subs

    def check_forward(self) -> None:
        """B7: PyTorch compute reachable from ModelNew.forward (methods, helpers, submodules, bases)."""
        if "ModelNew" not in self.classes:
            return
        kernels = {id(k) for k in self.kernels()}
        funcs = {
            n.name: n
            for n in self.tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and id(n) not in kernels
        }
        queue: list[tuple[str | None, ast.AST]] = [
            found for meth in ("forward", "__call__") if (found := self.lookup("ModelNew", meth))
        ]
        seen: set[int] = set()
        while queue:
            cls, fn = queue.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            layers, subs = self.members(cls) if cls else ({}, {})
            for n in ast.walk(fn):
                if isinstance(n, ast.BinOp | ast.AugAssign) and isinstance(n.op, ast.MatMult):
                    self.add(
                        "torch_compute_in_forward", n, "The @ operator runs a PyTorch matmul; use your Triton kernel."
                    )
                if not isinstance(n, ast.Call):
                    continue
                name = self.compute_name(n, layers)
                if name:
                    self.add("torch_compute_in_forward", n, f"{name} in forward runs PyTorch; use your Triton kernel.")
                func = n.func
                if isinstance(func, ast.Name) and func.id in funcs:
                    queue.append((None, funcs[func.id]))
                elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                    owner = func.value.id
                    if owner == "self" and cls:
                        found = self.lookup(cls, func.attr)
                        if found:
                            queue.append(found)
                        elif func.attr in subs:
                            queue += [f for m in ("forward", "__call__") if (f := self.lookup(subs[func.attr], m))]
                    elif owner in self.classes and func.attr in ("apply", "forward"):
                        found = self.lookup(owner, "forward")
                        if found:
                            queue.append(found)
                elif (
                    isinstance(func, ast.Attribute)
                    and isinstance(func.value, ast.Call)
                    and isinstance(func.value.func, ast.Name)
                    and func.value.func.id == "super"
                    and cls
                ):
                    found = self.lookup(cls, func.attr, skip_self=True)
                    if found:
                        queue.append(found)


def _is_main_guard(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":` (either operand order)."""
    if not (isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1):
        return False
    sides = [stmt.test.left, stmt.test.comparators[0]]
    return (
        isinstance(stmt.test.ops[0], ast.Eq)
        and any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
        and any(_const_str(x) == "__main__" for x in sides)
    )


def _drop_main_block(tree: ast.Module) -> None:
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
        _drop_main_block(tree)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return []
    try:
        return _Triage(tree).run()
    except Exception:  # a bug here must never block an evaluation; the dynamic checks still run
        return []
