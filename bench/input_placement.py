"""Does a memory-bound kernel's time depend on where its inputs lie in device memory? If so, a figure taken in one
process (one placement) moves from evaluation to evaluation, and so does the speedup.

    python bench/input_placement.py --kernelbench PATH/KernelBench --processes 3 --placements 6

For each problem (a KernelBench file and this project's honest kernel for it, bench/kernels/kernelbench), each of
`--processes` fresh interpreters builds the reference and the candidate, then for each of `--placements` placements
frees the previous inputs and the allocator's cache, holds a ballast block of a random size (so the inputs land at
other addresses, on other physical pages), makes the inputs and times `--calls` calls of each side as the evaluator
does (the L2 flushed before each, CUDA events). Prints one JSON line per process and a summary per problem: the
spread (CV) of each side's median across placements within a process, and across processes' first placements.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "bench" / "kernels" / "kernelbench"
DEFAULT_PROBLEMS = ["level1/98_KLDivLoss", "level1/96_HuberLoss", "level1/94_MSELoss", "level1/19_ReLU"]

_PROBE = r"""
import importlib.util, json, random, statistics, sys
import torch

reference_path, kernel_path, placements, calls, seed = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

ref_module, kernel_module = load(reference_path, "reference"), load(kernel_path, "candidate")
torch.manual_seed(0)
models = {
    "reference": ref_module.Model(*ref_module.get_init_inputs()).cuda(),
    "candidate": kernel_module.ModelNew(*ref_module.get_init_inputs()).cuda(),
}
flush = torch.empty(torch.cuda.get_device_properties(0).L2_cache_size * 2 // 4, dtype=torch.int32, device="cuda")
rng = random.Random(seed)
rows = []
for placement in range(placements):
    inputs = ballast = None
    torch.cuda.empty_cache()
    mb = 0 if placement == 0 else rng.randrange(1, 1500) * 2
    ballast = torch.empty(mb << 20, dtype=torch.uint8, device="cuda") if mb else None
    torch.manual_seed(1)
    with torch.device("cuda"):
        inputs = [v.cuda() if isinstance(v, torch.Tensor) else v for v in ref_module.get_inputs()]
    addresses = [(v.data_ptr() % (1 << 30)) >> 20 for v in inputs if isinstance(v, torch.Tensor)]
    row = {"placement": placement, "ballast_mb": mb, "input_addresses_mod_1g_mb": addresses}
    for side, model in models.items():
        for _ in range(3):
            model(*inputs)
        torch.cuda.synchronize()
        times = []
        for _ in range(calls):
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*inputs)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        row[side + "_ms"] = round(statistics.median(times), 5)
    rows.append(row)
print(json.dumps(rows))
"""


def cv(values: list[float]) -> float | None:
    return round(statistics.pstdev(values) / statistics.mean(values), 4) if len(values) > 1 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernelbench", type=Path, required=True, help="a KernelBench checkout's KernelBench/ folder")
    parser.add_argument("--problem", action="append", help=f"repeatable (default: {', '.join(DEFAULT_PROBLEMS)})")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--placements", type=int, default=6)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    for problem in args.problem or DEFAULT_PROBLEMS:
        runs = []
        for process in range(args.processes):
            done = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    _PROBE,
                    str(args.kernelbench / f"{problem}.py"),
                    str(KERNELS / f"{problem}.py"),
                    str(args.placements),
                    str(args.calls),
                    str(process),
                ],
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=600,
                check=True,
            )
            rows = json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps({"problem": problem, "process": process, "rows": rows}), flush=True)
            runs.append(rows)
        summary = {"problem": problem}
        for side in ("candidate", "reference"):
            within = [cv([r[side + "_ms"] for r in rows]) for rows in runs]
            summary[side] = {
                "cv_across_placements_per_process": within,
                "cv_across_processes_first_placement": cv([rows[0][side + "_ms"] for rows in runs]),
                "min_ms": min(r[side + "_ms"] for rows in runs for r in rows),
                "max_ms": max(r[side + "_ms"] for rows in runs for r in rows),
            }
        speedups = [r["reference_ms"] / r["candidate_ms"] for rows in runs for r in rows]
        summary["speedup"] = {"min": round(min(speedups), 4), "max": round(max(speedups), 4), "cv": cv(speedups)}
        print("SUMMARY " + json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
