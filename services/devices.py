"""Device selection and the redirect that lets `device='cuda'` problems run where there is no GPU: on CPU tensors
(the interpreter) or on meta tensors (the compiler child, services.child.compiler)."""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _is_cuda(dev: Any) -> bool:
    if isinstance(dev, torch.device):
        return dev.type == "cuda"
    if isinstance(dev, str):
        return dev.startswith("cuda")
    return False


class DeviceRedirect(TorchFunctionMode):
    """Rewrites every request for a CUDA device into `target` ("cpu" or "meta"), so KernelBench problems written
    with `.cuda()` or `device="cuda"` run unchanged without one."""

    def __init__(self, target: str = "cpu"):
        super().__init__()
        self.target = target

    def _redirect(self, value: Any) -> Any:
        return self.target if _is_cuda(value) else value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = self._redirect(kwargs["device"])
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.to:
            args = (
                args[0],
                *(
                    self._redirect(a) if not isinstance(a, int) or isinstance(a, bool) else self.target
                    for a in args[1:]
                ),
            )
        return func(*args, **kwargs)


class _WallEvent:
    """Stand-in for `torch.cuda.Event` on CPU: records the wall clock."""

    def __init__(self, enable_timing: bool = False, **_: Any):
        self.t: float | None = None

    def record(self, stream: Any = None) -> None:
        import time

        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: _WallEvent) -> float:
        return (end.t - self.t) * 1e3


def enable_cpu_redirect(shims: bool = True) -> None:
    """Process-wide, for a CPU-mode child: it never runs anything else. Besides the redirect, user code gets
    what a GPU run would give it (autotuning, `is_cuda`, fp32 scalars, libdevice, TF32, compile errors): see
    `services.child.interpreter_shims`. `shims=False` leaves the interpreter bare (to measure what the shims change)."""
    DeviceRedirect().__enter__()
    if shims:
        from services.child import interpreter_shims

        interpreter_shims.install()
    stand_in_device_calls()
    torch.cuda.Event = _WallEvent


def stand_in_device_calls() -> None:
    """Where nothing runs on a GPU (CPU mode, the compiler child): there is nothing to wait for, and one device."""
    torch.cuda.synchronize = lambda device=None: None
    torch.cuda.current_device = lambda: 0
