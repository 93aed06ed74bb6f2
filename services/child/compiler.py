"""The compiler child: compiles a candidate's Triton kernels for the GPU, with no GPU, before its first call.

A candidate's first call compiles its kernels (and, on Triton 3.6, a C launcher per kernel signature): seconds of
CPU work that the candidate child does while it holds the device, so a measurement of another evaluation on the
same GPU waits for it. This child does that work beforehand and out of the device's reach: it is started with no
GPU within reach (services.child's `_hide_devices`, before any user code runs), so
whatever the candidate's code does here cannot touch another evaluation's measurement. It runs forward() once on
meta tensors of the published shapes, which user code sees as cuda:0 (services.devices.DeviceRedirect and the
interpreter shims' device view), and every launch of a Triton kernel becomes a compilation for the parent's GPU
(`Precompile.capability`). Autotuned kernels compile every config: the stand-in driver's benchmarker scores them in
the order tried, as in CPU mode. What the pass leaves in this child's Triton cache the parent copies into the
candidate child's (services.parent.precompile), whose first calls then find their kernels compiled.

The pass is best effort and decides nothing: code that needs values (`.item()`, data-dependent shapes) ends it
early, keeping whatever it compiled, and the candidate child compiles the rest as it always did.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import torch

from services.child import guards, interpreter_shims
from services.child.runtime import import_source
from services.devices import DeviceRedirect, stand_in_device_calls
from services.protocol import channel
from services.protocol.messages import Job, Precompile, Precompiled, parse_command, reply_header


class _Pass:
    """Counts what the pass compiled; `install` turns every launch into a compilation for `capability`."""

    def __init__(self, libcuda: bool) -> None:
        self.libcuda = libcuda  # Triton's C modules link it: without it there is nothing to build them for
        self.compiled: set[str] = set()  # the hashes of the kernels compiled (a kernel launched again is one)
        self.modules = 0

    def install(self, capability: tuple[int, int]) -> None:
        from triton.backends.nvidia import driver as nvidia
        from triton.runtime.jit import JITFunction

        interpreter_shims.install_driver(capability)
        # Triton 3.6 compiles a C launcher per kernel signature at the first launch; 3.7 has one generic launcher.
        per_signature = hasattr(nvidia, "make_launcher") and self.libcuda
        compile_only = JITFunction.run
        counts = self

        def run(fn: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            kernel = compile_only(fn, *args, grid=grid, warmup=True, **kwargs)
            if kernel is not None and kernel.hash not in counts.compiled:
                counts.compiled.add(kernel.hash)
                if per_signature:
                    nvidia.CudaLauncher(kernel.src, kernel.metadata)
                    counts.modules += 1
            return kernel

        JITFunction.run = run

    def build_driver_module(self) -> None:
        """Triton's own C module for the driver, which a child builds when it first launches."""
        from triton.backends.nvidia import driver as nvidia

        if self.libcuda:
            nvidia.CudaUtils()
            self.modules += 1


def _has_libcuda() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def _stopped(what: str, exc: BaseException) -> str:
    return f"{what}: {type(exc).__name__}: {str(exc)[:300]}"


def precompile(job: Job, command: Precompile) -> Precompiled:
    """Compile what one forward() on meta inputs launches; where it stopped early, and why."""
    capability = (int(command.capability[0]), int(command.capability[1]))
    counts = _Pass(libcuda=_has_libcuda())
    what = "building Triton's driver module"
    try:
        counts.build_driver_module()  # before any user code, which could otherwise have its say in it
        counts.install(capability)
        DeviceRedirect("meta").__enter__()
        interpreter_shims.install_device_view("meta", capability)
        stand_in_device_calls()
        guards.AuditGuard(os.getcwd()).install()
        what = "importing the reference"
        reference = import_source("kg_reference", job.reference_source)
        what = "importing the candidate"
        candidate = import_source("kg_candidate", job.candidate_source or "")
        what = "constructing ModelNew"
        with torch.device("meta"), torch.no_grad():
            model = candidate.ModelNew(*reference.get_init_inputs()).to("cuda")
            what = "get_inputs()"
            inputs = reference.get_inputs()
            what = "forward()"
            model(*inputs)
    except BaseException as exc:  # whatever user code raises (or exits with) only ends the pass
        return Precompiled(kernels=len(counts.compiled), modules=counts.modules, stopped=_stopped(what, exc))
    return Precompiled(kernels=len(counts.compiled), modules=counts.modules)


def serve(job: Job, in_fd: int, out_fd: int) -> None:
    """One Precompile, answered with the job's nonce; then the parent closes this child."""
    header, _ = channel.recv(in_fd)
    command = parse_command(header)
    if not isinstance(command, Precompile):
        return
    reply = reply_header(precompile(job, command))
    reply.update(nonce=job.nonce, seq=1)
    channel.send(out_fd, reply)
