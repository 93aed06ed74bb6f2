"""How much of a small kernel's event time is host launch latency, and how long a GPU spin keeps it out.

    python bench/launch_overhead.py                 # 64x1000 ReLU, torch against Triton
    python bench/launch_overhead.py --bundled level1/5_RMSNorm level1/7_Add_fp16 level2/1_Linear_Bias_ReLU

Default: times a 64x1000 ReLU (the bundled problem's size), torch.relu against a one-kernel Triton ReLU: the
host time of the launch call, and the CUDA-event time of flush + call as an evaluator measures it,
(1) in a hot loop, (2) with the host idle for 0.5 ms before each call, as a child waiting on its pipe
is, and (3) idle, with a GPU-side delay queued after the flush (the "launch shield") so the start event
fires only once the host has enqueued the call.

--bundled: each bundled problem's reference and example kernel as a child times them (fresh inputs from
`get_inputs` before each call, L2 flush, spin, events around forward()), for spins of 0, 0.4M, 1M and 2M
cycles: the event time's 10th, 50th and 90th percentiles, the host time of forward(), and the share of calls
whose forward() returned after the spin had ended (`start.query()`), which the evaluator's timer counts as
uncovered and answers by doubling its spin.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = ROOT / "services" / "bundled"
SPINS = (0, 400_000, 1_000_000, 2_000_000)


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


def measure(
    fn: Callable, inputs: Callable[[int], list], flush: torch.Tensor, idle_s: float = 0.0, shield_cycles: int = 0
) -> dict[str, float]:
    """2,000 calls (the first 20 not kept): host time of the call, event time percentiles, uncovered share."""
    host, event, uncovered = [], [], 0
    for i in range(2020):
        args = inputs(i)
        torch.cuda.synchronize()
        if idle_s:
            time.sleep(idle_s)
        flush.zero_()
        if shield_cycles:
            torch.cuda._sleep(shield_cycles)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        with torch.no_grad():
            fn(*args)
        spent = time.perf_counter() - t0
        late = start.query()
        end.record()
        end.synchronize()
        if i >= 20:
            host.append(spent * 1e6)
            event.append(start.elapsed_time(end) * 1e3)
            uncovered += late
    q = statistics.quantiles(event, n=10, method="inclusive")
    return {
        "host_us": statistics.median(host),
        "p10_us": q[0],
        "p50_us": statistics.median(event),
        "p90_us": q[-1],
        "uncovered": uncovered / len(event),
    }


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _inputs(ref: ModuleType, seed: int) -> list:
    """Fresh inputs from the problem's `get_inputs`, on the device, as a child makes them before each call."""
    torch.manual_seed(seed)
    with torch.device("cuda"):
        return [v.cuda() if isinstance(v, torch.Tensor) else v for v in ref.get_inputs()]


def bundled(problem_ids: list[str], flush: torch.Tensor) -> None:
    for pid in problem_ids:
        ref = _load("kg_reference", BUNDLED / "problems" / f"{pid}.py")
        cand = _load("kg_candidate", BUNDLED / "kernels" / f"{pid}.py")
        torch.manual_seed(0)
        with torch.device("cuda"):
            init = ref.get_init_inputs()
            models = {"reference": ref.Model(*init), "candidate": cand.ModelNew(*init)}

        for side, model in models.items():
            for spin in SPINS:
                m = measure(model, lambda seed, ref=ref: _inputs(ref, seed), flush, shield_cycles=spin)
                print(
                    f"{pid:28s} {side:9s} spin {spin:>9,d}  event p10/p50/p90 {m['p10_us']:6.2f} {m['p50_us']:6.2f} "
                    f"{m['p90_us']:7.2f} us  forward() host {m['host_us']:5.0f} us  uncovered {m['uncovered']:.1%}"
                )


def relu(flush: torch.Tensor) -> None:
    x = torch.randn(64, 1000, device="cuda")
    for _ in range(50):
        triton_relu(x), torch.relu(x)
    for label, kwargs in (
        ("hot loop", {}),
        ("idle 0.5 ms", {"idle_s": 5e-4}),
        ("idle + shield", {"idle_s": 5e-4, "shield_cycles": 400_000}),
    ):
        for name, fn in (("torch.relu", torch.relu), ("triton relu", triton_relu)):
            m = measure(fn, lambda _: [x], flush, **kwargs)
            print(f"{label:14s} {name:12s} host launch {m['host_us']:7.1f} us   event {m['p50_us']:7.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundled", nargs="+", metavar="PROBLEM", help="bundled problem ids, e.g. level1/5_RMSNorm")
    args = parser.parse_args()
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, dtype=torch.int32, device="cuda")
    if args.bundled:
        bundled(args.bundled, flush)
    else:
        relu(flush)
    print(f"GPU {torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}")


if __name__ == "__main__":
    main()
