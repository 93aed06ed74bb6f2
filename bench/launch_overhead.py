"""How much of a tiny kernel's event time is host launch latency, for Triton vs PyTorch.

    python bench/launch_overhead.py

Times a 64x1000 ReLU (the bundled problem's size), torch.relu against a one-kernel Triton ReLU: the
host time of the launch call, and the CUDA-event time of flush + call as an evaluator measures it,
(1) in a hot loop, (2) with the host idle for 0.5 ms before each call, as a child waiting on its pipe
is, and (3) idle, with a GPU-side delay queued after the flush (the "launch shield") so the start event
fires only once the host has enqueued the call.
"""

from __future__ import annotations

import statistics
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)


def triton_relu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    _relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


def measure(fn, x, flush, idle_s=0.0, shield_cycles=0, n=2000):
    host, event = [], []
    for _ in range(n):
        torch.cuda.synchronize()
        if idle_s:
            time.sleep(idle_s)
        flush.zero_()
        if shield_cycles:
            torch.cuda._sleep(shield_cycles)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        fn(x)
        host.append((time.perf_counter() - t0) * 1e3)
        end.record()
        end.synchronize()
        event.append(start.elapsed_time(end))
    return statistics.median(host), statistics.median(event)


def main() -> None:
    x = torch.randn(64, 1000, device="cuda")
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, dtype=torch.int32, device="cuda")
    for _ in range(50):
        triton_relu(x), torch.relu(x)
    for label, kwargs in (
        ("hot loop", {}),
        ("idle 0.5 ms", {"idle_s": 5e-4}),
        ("idle + shield", {"idle_s": 5e-4, "shield_cycles": 400_000}),
    ):
        for name, fn in (("torch.relu", torch.relu), ("triton relu", triton_relu)):
            host, event = measure(fn, x, flush, **kwargs)
            print(f"{label:14s} {name:12s} host launch {host * 1e3:7.1f} us   event {event * 1e3:7.1f} us")
    print(f"GPU {torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}")


if __name__ == "__main__":
    main()
