"""What the output digest costs per timed call, against one read of the same bytes.

    python bench/digest_cost.py                      # on the GPU: fp32 outputs of 1e4 .. 1.88e9 elements
    python bench/digest_cost.py --device cpu --sizes 10000,1000000

`services/protocol/tensors.fingerprint` runs twice per timed call (after the call returns and after the device is
synchronised), inside the timing slot's hold but outside the measured interval. At KernelBench sizes (RMSNorm's
output is 1.88e9 fp32 elements, 7.5 GB) a timed call cost ~70 ms beyond its kernel with the digest's int64 sums;
this shows how much of that the digest is. `read` is `torch.sum` over the same tensor, the floor for anything that
reads each byte once; `int64_sum` sums its raw bits into int64, as the digest once did (on a GPU that
is compute-bound, not a read). Prints one JSON line per size: median and min/max milliseconds over `--repeats`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.protocol.tensors import fingerprint


def _time_ms(fn: Callable[[], object], device: str, repeats: int) -> list[float]:
    fn()  # first use: allocator and kernel caches
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def _summary(times: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(times), 3), "min": round(min(times), 3), "max": round(max(times), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--sizes", default="10000,1000000,100000000,1879048192", help="fp32 elements, comma-separated")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        x = torch.rand(size, device=args.device)
        digest = _time_ms(lambda x=x: fingerprint(x), args.device, args.repeats)
        read = _time_ms(lambda x=x: torch.sum(x), args.device, args.repeats)
        int64_sum = _time_ms(lambda x=x: torch.sum(x.view(torch.int32), dtype=torch.int64), args.device, args.repeats)
        line = {
            "device": torch.cuda.get_device_name() if args.device == "cuda" else args.device,
            "elements": size,
            "gb": round(x.numel() * x.element_size() / 1e9, 3),
            "digest_ms": _summary(digest),
            "read_ms": _summary(read),
            "int64_sum_ms": _summary(int64_sum),
            "digest_over_read": round(statistics.median(digest) / statistics.median(read), 2),
        }
        print(json.dumps(line), flush=True)
        del x


if __name__ == "__main__":
    main()
