"""What a fresh GPU process pays for the first launch of each kernel (CUDA's lazy module loading), without and with
the warm-up a GPU child runs while it waits (services.child.boot._warm_device_code).

    python bench/first_use.py

Each mode runs in a fresh interpreter: CUDA context, the harness's imports, the warm-up in the second mode only, then
each operation twice (first launch, then again), synchronised and timed. Prints one JSON line per mode: the warm-up's
time and device memory, and per operation the first and second time in ms. The first times of operations the
warm-up covers (generators, the digest's int64 sums, comparisons, a small matmul per dtype) are what an
evaluation's first requests paid before it; the others (a problem's own kernels, such as its convolutions, and the
parent's comparison) stay.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_PROBE = r"""
import json, sys, time
import torch
from services.child.boot import _warm_device_code, import_harness
torch.cuda.init(); torch.empty(1, device="cuda"); import_harness(); torch.cuda.synchronize()
row = {"mode": sys.argv[1]}
if sys.argv[1] == "warm":
    free, t0 = torch.cuda.mem_get_info()[0], time.perf_counter()
    _warm_device_code()
    row["warm_up_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
    row["warm_up_device_mib"] = (free - torch.cuda.mem_get_info()[0]) >> 20
x, a = torch.randn(4096, device="cuda"), torch.randn(512, 512, device="cuda")
# A convolution as KernelBench's level-1 and level-2 problems make them (cuDNN: its handle, then the kernel).
image, w = torch.randn(8, 64, 56, 56, device="cuda"), torch.randn(64, 64, 3, 3, device="cuda")
ops = {
    "randn": lambda: torch.randn(1024, 1024, device="cuda"),
    "int64_sum": lambda: torch.sum(x.view(torch.int32), dtype=torch.int64),
    "equal": lambda: torch.equal(x, x),
    "matmul_fp32_512": lambda: a @ a,
    "matmul_fp16_512": lambda: a.half() @ a.half(),
    "relu": lambda: torch.relu(x),
    "isclose": lambda: torch.isclose(x, x).all(),
    "conv2d_fp32": lambda: torch.nn.functional.conv2d(image, w, padding=1),
    "conv2d_fp16": lambda: torch.nn.functional.conv2d(image.half(), w.half(), padding=1),
    "conv_transpose2d_fp32": lambda: torch.nn.functional.conv_transpose2d(image, w, padding=1),
}
for name, op in ops.items():
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        op()
        torch.cuda.synchronize()
        times.append(round((time.perf_counter() - t0) * 1e3, 2))
    row[name] = times
print(json.dumps(row))
"""


def main() -> None:
    for mode in ("cold", "warm"):
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, cwd=ROOT, timeout=300, check=True
        )
        print(done.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
