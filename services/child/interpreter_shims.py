"""What a CPU-mode child gives candidate code so that a kernel written for a GPU runs on the Triton interpreter.

Child-side only: `install()` runs in a CPU-mode child (reference or candidate) from
`services.devices.enable_cpu_redirect`, before any user code is imported. Nothing here reads, decides or reports a
verdict; the parent still compares every output itself. Each shim gives user code what a GPU run would give it:

- Autotuning. `@triton.autotune` benchmarks through the active driver, and the interpreter has none ("0 active
  drivers"). An interpreter driver is made active whose benchmarker runs each config once (so config pre-hooks,
  `reset_to_zero`, `restore_value` and the side effects of the tuning launches happen as on a GPU) and ranks the
  configs by the order in which they were tried. The rule: **the first config that survives Triton's own pruning
  (`early_config_prune`, `perf_model`/`top_k`) and runs without `OutOfResources`**. CPU time says nothing about a
  GPU, and a fixed rule keeps CPU verdicts reproducible. The same driver answers the device queries of Triton's
  tutorials (`get_active_torch_device`, `get_current_target`, `utils.get_device_properties`) as an H100 would.
- Devices. User code (the modules `kg_candidate` and `kg_reference`) sees CPU tensors as `cuda:0`: `x.is_cuda`,
  `x.device`, `x.get_device()` and `torch.cuda.is_available()` answer as on a GPU, and `torch.cuda`'s device
  queries describe an H100. Torch, Triton and the harness still see the real device; the CPU redirect in
  `services.devices` turns any CUDA placement back into the CPU.
- Scalars. Compiled Triton passes a Python float to a kernel as an fp32 scalar; the interpreter passed the Python
  float itself, so `eps.to(tl.float32)` failed. Float arguments now arrive as fp32 scalar tensors.
- TF32. On a GPU, `tl.dot` on fp32 operands runs on tensor cores in TF32 unless it asks for
  `input_precision="ieee"` (or "tf32x3"); the interpreter multiplied in full fp32, so a kernel that misses a 1e-4
  tolerance on every GPU passed on CPU. fp32 operands of a TF32 dot are now rounded to TF32 (10 mantissa bits, to
  nearest) before the product, which is accumulated in fp32.
- Compile errors. The compiler traces the whole kernel before it runs, so a misspelt `tl.` function, a libdevice
  call with a dtype it has no overload for or a failed `tl.static_assert` is a `CompilationError`. The interpreter
  raised them as `InterpreterError` while running. An exception of those kinds (`STATIC_ERRORS`) raised inside an
  interpreted kernel body is re-raised as `InterpretedCompilationError`, a `CompilationError`; a failed
  `tl.device_assert` stays a runtime error.
- libdevice. The interpreter refuses `extern_elementwise`, and `triton.language.extra.libdevice` holds stubs that
  return None. Both `tl.extra.cuda.libdevice.*` and `triton.language.extra.libdevice.*` now dispatch through CUDA's
  libdevice table (same argument types, same result types, same errors for unsupported dtypes) to numpy
  implementations of the `__nv_*` functions; `LIBDEVICE_NOT_IMPLEMENTED` lists the ones that stay unsupported.

Hooks are limited to names present in both Triton 3.6 and 3.7: `triton.runtime.driver.set_active`,
`triton.runtime.interpreter._implicit_cvt`, `InterpreterBuilder.create_extern_elementwise`,
`triton.runtime.interpreter.interpreter_semantic`, `InterpreterBuilder.create_dot`, `InterpretedFunction.run`,
`triton.compiler.errors.CompilationError` and the two libdevice modules.
"""

from __future__ import annotations

import itertools
import math
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from triton.compiler.errors import CompilationError

USER_MODULES = frozenset({"kg_candidate", "kg_reference"})
_CUDA0 = torch.device("cuda", 0)

# What the interpreter's device reports: an H100 SXM, the GPU the project's published numbers come from.
DEVICE_NAME = "NVIDIA H100 80GB HBM3"
CAPABILITY = (9, 0)
TRITON_DEVICE_PROPERTIES = {
    "max_shared_mem": 232448,
    "max_num_regs": 65536,
    "multiprocessor_count": 132,
    "warpSize": 32,
    "sm_clock_rate": 1980000,
    "mem_clock_rate": 2619000,
    "mem_bus_width": 5120,
}
TORCH_DEVICE_PROPERTIES = types.SimpleNamespace(
    name=DEVICE_NAME,
    major=CAPABILITY[0],
    minor=CAPABILITY[1],
    multi_processor_count=132,
    total_memory=80 * 1024**3,
    L2_cache_size=50 * 1024**2,
    warp_size=32,
    max_threads_per_multi_processor=2048,
    regs_per_multiprocessor=65536,
    is_integrated=False,
    is_multi_gpu_board=False,
)


def install() -> None:
    """All shims; idempotent only in the sense that a CPU-mode child calls it exactly once."""
    install_float_scalars()
    install_libdevice()
    install_tf32_dot()
    install_compile_errors()
    install_driver()
    install_device_view()


# -- who is asking ---------------------------------------------------------------------------------------
def _user_caller(depth: int = 2) -> bool:
    """Whether the frame `depth` levels up belongs to user code (the candidate or the reference module)."""
    try:
        return sys._getframe(depth).f_globals.get("__name__") in USER_MODULES
    except ValueError:
        return False


# -- scalars -----------------------------------------------------------------------------------------------
def install_float_scalars() -> None:
    import triton.language as tl
    from triton.runtime import interpreter

    original = interpreter._implicit_cvt

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):  # compiled Triton specialises every Python float as fp32
            handle = interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32)
            return tl.tensor(handle, tl.float32)
        return original(arg)

    implicit_cvt.__wrapped__ = original
    interpreter._implicit_cvt = implicit_cvt


# -- TF32 dot ---------------------------------------------------------------------------------------------
def round_to_tf32(x: np.ndarray) -> np.ndarray:
    """fp32 values rounded to TF32's 10-bit mantissa (to nearest, ties away from zero), kept as fp32."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = np.where(finite, (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000), bits)
    return rounded.astype(np.uint32).view(np.float32)


def install_tf32_dot() -> None:
    from triton._C.libtriton import ir
    from triton.runtime import interpreter

    original = interpreter.InterpreterBuilder.create_dot

    def create_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_num_imprecise_acc: Any) -> Any:
        if input_precision == ir.INPUT_PRECISION.TF32 and a.data.dtype == np.float32 and b.data.dtype == np.float32:
            a = interpreter.TensorHandle(round_to_tf32(a.data), a.dtype)
            b = interpreter.TensorHandle(round_to_tf32(b.data), b.dtype)
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    create_dot.__wrapped__ = original
    interpreter.InterpreterBuilder.create_dot = create_dot


# -- compile errors ----------------------------------------------------------------------------------------
STATIC_ERRORS = (
    AttributeError,
    NameError,
    TypeError,
    KeyError,
    ValueError,
    IndexError,
    ZeroDivisionError,
    AssertionError,
)


def _compile_time(exc: BaseException | None) -> bool:
    """Whether an exception from an interpreted kernel body is one the compiler would have raised while tracing."""
    if not isinstance(exc, STATIC_ERRORS):
        return False
    if isinstance(exc, AssertionError):  # tl.device_assert fails at run time on a GPU too
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_name in ("create_assert", "create_assume"):
                return False
            tb = tb.tb_next
    return True


class InterpretedCompilationError(CompilationError):
    """What the compiler would have raised for this kernel, found by the interpreter."""

    def __init__(self, kernel: str, cause: BaseException):
        super().__init__(None, None, f"{kernel}: {type(cause).__name__}: {cause}")


def install_compile_errors() -> None:
    from triton.runtime import interpreter
    from triton.runtime.errors import InterpreterError

    original = interpreter.InterpretedFunction.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, **kwargs)
        except InterpreterError as exc:
            if _compile_time(exc.__cause__):
                name = getattr(self.fn, "__name__", "kernel")
                raise InterpretedCompilationError(name, exc.__cause__) from exc
            raise

    run.__wrapped__ = original
    interpreter.InterpretedFunction.run = run


# -- libdevice ---------------------------------------------------------------------------------------------
def _erf_like(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    vec = np.vectorize(fn, otypes=[np.float64])
    return lambda x: vec(_f64(x))


def _f64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _normcdfinv(p: float) -> float:
    # Acklam's rational approximation refined by one Halley step (error ~1e-15).
    if not 0.0 < p < 1.0:
        return -math.inf if p == 0.0 else (math.inf if p == 1.0 else math.nan)
    lo, hi = 0.02425, 1 - 0.02425
    a = (-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.3577518672690, -30.66479806614716)
    b = (-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572)
    c = (-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968)
    d = (0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416)
    if p < lo or p > hi:
        q = math.sqrt(-2 * math.log(p if p < lo else 1 - p))
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + 2.938163982698783) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
        )
        x = x if p < lo else -x
    else:
        q = p - 0.5
        r = q * q
        x = (
            (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + 2.506628277459239)
            * q
            / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
        )
    e = 0.5 * math.erfc(-x / math.sqrt(2)) - p
    u = e * math.sqrt(2 * math.pi) * math.exp(x * x / 2)
    return x - u / (1 + x * u / 2)


_erf = _erf_like(math.erf)
_erfc = _erf_like(math.erfc)
_normcdfinv_vec = _erf_like(_normcdfinv)

# `__nv_<name>` (and its fp32 spelling `__nv_<name>f`, and `__nv_fast_<name>f`) -> numpy, computed in the
# arguments' precision or in float64 and rounded once to the result type.
_LIBDEVICE: dict[str, Callable[..., np.ndarray]] = {
    "abs": np.abs,
    "llabs": np.abs,
    "fabs": np.abs,
    "acos": np.arccos,
    "acosh": np.arccosh,
    "asin": np.arcsin,
    "asinh": np.arcsinh,
    "atan": np.arctan,
    "atanh": np.arctanh,
    "atan2": np.arctan2,
    "cbrt": np.cbrt,
    "rcbrt": lambda x: 1 / np.cbrt(x),
    "ceil": np.ceil,
    "floor": np.floor,
    "trunc": np.trunc,
    "rint": np.rint,
    "nearbyint": np.rint,
    "round": _round_half_away,
    "llround": lambda x: _round_half_away(x).astype(np.int64),
    "llrint": lambda x: np.rint(x).astype(np.int64),
    "cos": np.cos,
    "cosh": np.cosh,
    "cospi": lambda x: np.cos(np.pi * _f64(x)),
    "sin": np.sin,
    "sinh": np.sinh,
    "sinpi": lambda x: np.sin(np.pi * _f64(x)),
    "tan": np.tan,
    "tanh": np.tanh,
    "erf": _erf,
    "erfc": _erfc,
    "erfcx": lambda x: np.exp(_f64(x) ** 2) * _erfc(x),
    "normcdf": lambda x: 0.5 * _erfc(-_f64(x) / np.sqrt(2.0)),
    "normcdfinv": _normcdfinv_vec,
    "erfinv": lambda x: _normcdfinv_vec((_f64(x) + 1) / 2) / np.sqrt(2.0),
    "erfcinv": lambda x: -_normcdfinv_vec(_f64(x) / 2) / np.sqrt(2.0),
    "exp": np.exp,
    "exp2": np.exp2,
    "exp10": lambda x: np.power(10.0, _f64(x)),
    "expm1": np.expm1,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "log1p": np.log1p,
    "logb": lambda x: np.floor(np.log2(np.abs(_f64(x)))),
    "ilogb": lambda x: np.floor(np.log2(np.abs(_f64(x)))).astype(np.int32),
    "lgamma": _erf_like(math.lgamma),
    "tgamma": _erf_like(math.gamma),
    "sqrt": np.sqrt,
    "fsqrt_rn": np.sqrt,
    "dsqrt_rn": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "frsqrt_rn": lambda x: 1 / np.sqrt(x),
    "frcp_rn": lambda x: 1 / x,
    "drcp_rn": lambda x: 1 / x,
    "saturate": lambda x: np.clip(x, 0, 1),
    "signbit": lambda x: np.signbit(x).astype(np.int32),
    "signbitd": lambda x: np.signbit(x).astype(np.int32),
    "isnan": lambda x: np.isnan(x).astype(np.int32),
    "isnand": lambda x: np.isnan(x).astype(np.int32),
    "isinf": lambda x: np.isinf(x).astype(np.int32),
    "isinfd": lambda x: np.isinf(x).astype(np.int32),
    "finite": lambda x: np.isfinite(x).astype(np.int32),
    "isfinited": lambda x: np.isfinite(x).astype(np.int32),
    "copysign": np.copysign,
    "fdim": lambda x, y: np.where(x > y, x - y, np.zeros_like(x)),
    "fmax": np.fmax,
    "fmin": np.fmin,
    "max": np.maximum,
    "min": np.minimum,
    "umax": np.maximum,
    "umin": np.minimum,
    "llmax": np.maximum,
    "llmin": np.minimum,
    "ullmax": np.maximum,
    "ullmin": np.minimum,
    "fmod": np.fmod,
    "remainder": lambda x, y: x - y * np.rint(x / y),
    "hypot": np.hypot,
    "rhypot": lambda x, y: 1 / np.hypot(x, y),
    "nextafter": np.nextafter,
    "pow": lambda x, y: np.power(_f64(x), _f64(y)),
    "powi": lambda x, n: np.power(_f64(x), _f64(n)),
    "ldexp": lambda x, n: np.ldexp(x, n.astype(np.int32)),
    "scalbn": lambda x, n: np.ldexp(x, n.astype(np.int32)),
    "fadd_rn": np.add,
    "dadd_rn": np.add,
    "fsub_rn": np.subtract,
    "dsub_rn": np.subtract,
    "fmul_rn": np.multiply,
    "dmul_rn": np.multiply,
    "fdiv_rn": np.divide,
    "ddiv_rn": np.divide,
    "fdivide": np.divide,
    "fma": lambda x, y, z: _f64(x) * _f64(y) + _f64(z),
    "fma_rn": lambda x, y, z: _f64(x) * _f64(y) + _f64(z),
    "norm3d": lambda x, y, z: np.sqrt(_f64(x) ** 2 + _f64(y) ** 2 + _f64(z) ** 2),
    "rnorm3d": lambda x, y, z: 1 / np.sqrt(_f64(x) ** 2 + _f64(y) ** 2 + _f64(z) ** 2),
    "float_as_int": lambda x: x.astype(np.float32).view(np.int32),
    "int_as_float": lambda x: x.astype(np.int32).view(np.float32),
    "float_as_uint": lambda x: x.astype(np.float32).view(np.uint32),
    "uint_as_float": lambda x: x.astype(np.uint32).view(np.float32),
    "double_as_longlong": lambda x: _f64(x).view(np.int64),
    "longlong_as_double": lambda x: x.astype(np.int64).view(np.float64),
    "double2float_rn": lambda x: x.astype(np.float32),
    "int2float_rn": lambda x: x.astype(np.float32),
    "int2double_rn": lambda x: _f64(x),
    "ll2float_rn": lambda x: x.astype(np.float32),
    "ll2double_rn": lambda x: _f64(x),
    "float2int_rn": lambda x: np.rint(x).astype(np.int32),
    "float2int_rz": lambda x: np.trunc(x).astype(np.int32),
    "float2ll_rn": lambda x: np.rint(x).astype(np.int64),
    "float2ll_rz": lambda x: np.trunc(x).astype(np.int64),
    "double2int_rn": lambda x: np.rint(x).astype(np.int32),
    "double2int_rz": lambda x: np.trunc(x).astype(np.int32),
    "double2ll_rn": lambda x: np.rint(x).astype(np.int64),
    "double2ll_rz": lambda x: np.trunc(x).astype(np.int64),
    "popc": lambda x: np.array([bin(int(v) & 0xFFFFFFFF).count("1") for v in x.reshape(-1)], np.int32).reshape(x.shape),
    "popcll": lambda x: np.array(
        [bin(int(v) & 0xFFFFFFFFFFFFFFFF).count("1") for v in x.reshape(-1)], np.int32
    ).reshape(x.shape),
}
# Directed rounding (`_rd`, `_ru`, `_rz` arithmetic), Bessel functions, byte and bit tricks (`brev`, `clz`, `ffs`,
# `byte_perm`, `sad`, `mulhi`, `mul24`, `hadd`) and `frexp`-style splits raise NotImplementedError in CPU mode.
LIBDEVICE_NOT_IMPLEMENTED = (
    "directed rounding (_rd/_ru/_rz), Bessel (j0/j1/jn/y0/y1/yn, cyl_bessel_*), brev, clz, ffs, byte_perm, sad, "
    "mulhi, mul24, hadd/rhadd, hiloint2double, double2hiint/loint, rcp64h"
)


def _libdevice_impl(symbol: str) -> Callable[..., np.ndarray] | None:
    name = symbol.removeprefix("__nv_")
    fast = name.startswith("fast_")
    name = name.removeprefix("fast_")
    for key in (name, name[:-1] if name.endswith("f") else None):
        if key and key in _LIBDEVICE:
            return _LIBDEVICE[key]
    if fast and name == "fdividef":
        return np.divide
    return None


def create_extern_elementwise(
    builder: Any, lib_name: str, lib_path: str, symbol: str, args: Sequence[Any], ret_type: Any, is_pure: bool
) -> Any:
    """The interpreter's missing `extern_elementwise`: a libdevice symbol evaluated with numpy."""
    from triton.runtime import interpreter

    impl = _libdevice_impl(symbol)
    if impl is None:
        raise NotImplementedError(
            f"libdevice {symbol} has no CPU implementation in KernelGym's interpreter mode "
            f"(not implemented: {LIBDEVICE_NOT_IMPLEMENTED}); it runs on a GPU"
        )
    scalar = getattr(ret_type, "scalar", ret_type)
    arrays = [a.data for a in args]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    with np.errstate(all="ignore"):
        out = np.asarray(impl(*arrays))
    out = np.broadcast_to(out, shape).astype(interpreter._get_np_dtype(scalar), copy=True)
    return interpreter.TensorHandle(out, scalar)


def _semantic_call(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A libdevice builtin called from interpreted code, given the interpreter's semantic."""
    from triton.runtime import interpreter

    def call(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("_semantic", None)
        return fn(*args, _semantic=interpreter.interpreter_semantic, **kwargs)

    call.__name__ = getattr(fn, "__name__", "libdevice")
    call.__wrapped__ = fn
    return call


def install_libdevice() -> None:
    import triton.language.extra.cuda.libdevice as cuda_libdevice
    import triton.language.extra.libdevice as stubs
    from triton.language.core import TRITON_BUILTIN
    from triton.runtime import interpreter

    interpreter.InterpreterBuilder.create_extern_elementwise = create_extern_elementwise
    implemented = {}
    for name, fn in vars(cuda_libdevice).items():
        if callable(fn) and getattr(fn, TRITON_BUILTIN, False):
            implemented[name] = _semantic_call(fn)
            setattr(cuda_libdevice, name, implemented[name])
    for name, fn in list(vars(stubs).items()):
        if callable(fn) and getattr(fn, "__module__", "") == stubs.__name__ and name in implemented:
            setattr(stubs, name, implemented[name])


# -- the interpreter's driver: autotuning and Triton's device queries ---------------------------------------
class _DeviceUtils:
    def get_device_properties(self, device: Any = 0) -> dict[str, int]:
        return dict(TRITON_DEVICE_PROPERTIES)


class FirstConfigBenchmarker:
    """Runs each config's launch once and scores configs in the order they are tried, so the autotuner keeps
    the first one that runs (see the module docstring for why)."""

    def __init__(self) -> None:
        self._order = itertools.count()

    def __call__(self, kernel_call: Callable[[], Any], quantiles: Sequence[float] | None = None, **_: Any) -> Any:
        kernel_call()
        rank = float(next(self._order))
        return [rank] * len(quantiles) if quantiles else rank


def make_driver(capability: tuple[int, int] = CAPABILITY) -> Any:
    """A driver that answers as a GPU of `capability` would, with no GPU behind it: the interpreter's, and the
    compiler child's (services.child.compiler), which compiles for that GPU."""
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase

    class StandInDriver(DriverBase):
        """Never picked by Triton's own discovery (`is_active` is False); made active explicitly."""

        def __init__(self) -> None:
            super().__init__()
            self.utils = _DeviceUtils()
            self._benchmarker = FirstConfigBenchmarker()

        @classmethod
        def is_active(cls) -> bool:
            return False

        def map_python_to_cpp_type(self, ty: str) -> str:
            raise NotImplementedError("the Triton interpreter compiles no launcher")

        def get_current_target(self) -> Any:
            return GPUTarget("cuda", capability[0] * 10 + capability[1], 32)

        def get_active_torch_device(self) -> torch.device:
            return _CUDA0

        def get_benchmarker(self) -> FirstConfigBenchmarker:
            return self._benchmarker

        def get_device_interface(self) -> Any:
            return torch.cuda

        def get_current_device(self) -> int:
            return 0

        def set_current_device(self, device: int) -> None:
            pass

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

        def get_device_capability(self, device: int | None = None) -> tuple[int, int]:
            return capability

        def get_empty_cache_for_benchmark(self) -> torch.Tensor:
            return torch.empty(1 << 16, dtype=torch.int32)

        def clear_cache(self, cache: torch.Tensor) -> None:
            cache.zero_()

    return StandInDriver()


def install_driver(capability: tuple[int, int] = CAPABILITY) -> None:
    from triton.runtime import driver

    driver.set_active(make_driver(capability))


# -- what user code sees of devices ------------------------------------------------------------------------
class _NoDeviceContext:
    """`torch.cuda.device(...)` on the interpreter: there is one device, so entering it changes nothing."""

    def __init__(self, device: Any = None) -> None:
        self.idx = 0

    def __enter__(self) -> _NoDeviceContext:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def install_device_view(shown: str = "cpu", capability: tuple[int, int] = CAPABILITY) -> None:
    """User code sees tensors on `shown` (the device a DeviceRedirect puts them on) as cuda:0, and a GPU of
    `capability`."""
    base = torch._C.TensorBase
    real_device = base.__dict__["device"]
    real_is_cuda = base.__dict__["is_cuda"]
    real_get_device = base.get_device
    real_is_available = torch.cuda.is_available
    real_device_count = torch.cuda.device_count

    def device(self: torch.Tensor) -> torch.device:
        dev = real_device.__get__(self)
        return _CUDA0 if dev.type == shown and _user_caller() else dev

    def is_cuda(self: torch.Tensor) -> bool:
        return bool(real_is_cuda.__get__(self)) or (real_device.__get__(self).type == shown and _user_caller())

    def get_device(self: torch.Tensor) -> int:
        index = real_get_device(self)
        return 0 if index < 0 and _user_caller() else index

    def is_available() -> bool:
        return True if _user_caller() else real_is_available()

    def device_count() -> int:
        return 1 if _user_caller() else real_device_count()

    torch.Tensor.device = property(device, doc=real_device.__doc__)
    torch.Tensor.is_cuda = property(is_cuda, doc=real_is_cuda.__doc__)
    torch.Tensor.get_device = get_device
    cuda = torch.cuda
    cuda.is_available = is_available
    cuda.device_count = device_count
    cuda.get_device_name = lambda device=None: DEVICE_NAME
    cuda.get_device_capability = lambda device=None: capability
    properties = types.SimpleNamespace(
        **{**vars(TORCH_DEVICE_PROPERTIES), "major": capability[0], "minor": capability[1]}
    )
    cuda.get_device_properties = lambda device=None: properties
    cuda.set_device = lambda device: None
    cuda.device = _NoDeviceContext
    cuda.empty_cache = lambda: None
