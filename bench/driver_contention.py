"""Which CUDA driver operations on one GPU slow down while another GPU of the host churns evaluation children.

    python bench/driver_contention.py                       # neighbours 0, 2, 4 on GPU 1; 6 s per condition
    python bench/driver_contention.py --neighbours 0,4 --neighbour-gpu 0 --seconds 10
    python bench/driver_contention.py --neighbours 0,4,12 --malloc-mb 4096 --neighbour-mb 4096   # published sizes
    python bench/driver_contention.py --operations timed_kernel --neighbour-gpu 0 --neighbours 0,2 \
        --neighbour-kind malloc --neighbour-mb 4096     # a timed call beside allocations on its own GPU
    python bench/driver_contention.py --operations timed_kernel --neighbour-gpu 0 --neighbours 0,2 \
        --neighbour-kind profile                        # ... beside children that each start a profiler
    python bench/driver_contention.py --operations timed_kernel --neighbour-gpu 0 --neighbours 2 \
        --neighbour-kind phases --neighbour-mb 2048     # ... told apart by allocating and giving back

On a host of two GPUs, the service's requests that hand tensors over or profile took 2-3.5 times as long as on one,
while the timed calls did not change (docs/benchmarks.md); context creation alone scales across
GPUs (bench/context_churn.py). This times, on GPU 0, each operation an evaluation's requests make of the driver, in
turn with `--neighbours` loops on `--neighbour-gpu` that each do what an evaluation's child does: a fresh process
forked from one with torch imported, its CUDA context, a few torch operations (their kernels load lazily), a
tensor handed over to its parent through CUDA IPC, exit. The operations:

- `launch`: a small kernel and a synchronisation (no driver call beyond the launch path);
- `event`: an interprocess event created, its handle taken, destroyed;
- `malloc`: `--malloc-mb` (64) allocated and returned to the driver (cudaMalloc and cudaFree);
- `profile`: the consumer profiles a small forward as a child's profile request does (torch.profiler, CUDA
  activity: CUPTI), holding no mapping of the producer's memory;
- `ipc`: the consumer opens a buffer the producer shares (services.protocol.tensors.share_cuda/open_cuda), copies
  into it and drops it, opening and closing the segment's mapping each time, as every hand-over did before
  mappings were kept;
- `ipc_kept`: the same keeping the segment's mapping open (open_cuda's `mapped`), as a child does since;
- `profile_mapped`: `profile` again, now that the consumer holds that mapping. With open mappings kept, a child's
  profile request took 2.7 times as long through the service: this tells whether the mapping is why;
- `timed_kernel`: a memory-bound kernel over `--kernel-mb` (an out-of-place multiply), timed between CUDA events as
  the harness times a call: with `--neighbour-gpu 0`, whether other processes' driver work on the measured GPU
  (children starting and ending, or a parent's allocations given back: `--neighbour-kind malloc`; children that
  also run a profiler session, as a candidate's profile request does: `--neighbour-kind profile`) slows a
  measurement that no other evaluation's kernels share; with `--neighbour-kind phases`, whether allocating or giving
  back does (each call counted by the neighbours' phase it began in).

The operations run in this order in each condition (the last needs the one before it).
Prints one JSON line per (neighbours, operation): the operation's first use in the condition's fresh processes
(`first_ms`: a fresh child pays it in every evaluation), then median and spread of milliseconds over the
condition's seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.protocol import channel
from services.protocol.tensors import open_cuda, share_cuda

OPERATIONS = ("launch", "event", "malloc", "profile", "ipc", "ipc_kept", "profile_mapped", "timed_kernel")
NEIGHBOURS = ("child", "malloc", "profile", "phases")
PHASE_BLOCK_MB = 32  # `phases`: what a small problem's receive buffer is


def _profile_small(x: torch.Tensor) -> None:
    """A profiler session over one small operation, as a child's profile request runs one (CUPTI, CUDA activity)."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        (x * 2).sum()
        torch.cuda.synchronize()
    prof.events()


def _child_like(mb: int, profiled: bool = False) -> None:
    """In a fresh fork: what one evaluation child does to the driver, handing over `mb` MB, then exit; `profiled`:
    with a profiler session over a small operation first (its first in the process: CUPTI's start)."""
    parent_sock, child_sock = socket.socketpair()
    parent_end, child_end = parent_sock.fileno(), child_sock.fileno()

    def produce() -> None:  # the hand-over's producer: this child's parent in the service
        buf = torch.empty(mb << 18, device="cuda")
        channel.send(parent_end, {"buf": share_cuda(buf, keep=False)})
        channel.recv(parent_end, time.monotonic() + 60)

    pid = _forked(produce)
    x = torch.randn(4096, device="cuda")
    for op in (torch.sum, torch.softmax, torch.cumsum, torch.sort):
        y = op(x, 0) if op is not torch.sum else op(x)
    if profiled:
        _profile_small(x)
    header, _ = channel.recv(child_end, time.monotonic() + 60)
    dst = open_cuda(header["buf"], {})
    dst.copy_(x[: dst.numel()].repeat(dst.numel() // 4096 + 1)[: dst.numel()])
    torch.cuda.synchronize()
    del dst, y
    channel.send(child_end, {"done": True})
    os.waitpid(pid, 0)


def _forked(work: Callable[[], object]) -> int:
    """`work` in a forked child, which exits 0 once it returns, or 1 with its traceback printed: a fork that ends
    with `os._exit` prints nothing of an exception on its own."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            work()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(code)
    return pid


def _neighbour(gpu: int, mb: int, kind: str, windows: str) -> None:
    """Churn evaluation-like children on `gpu` until killed (`profile`: each with a profiler session); `malloc`:
    allocate `mb` and give it back to the driver, again and again, as a parent's receive buffers are after each
    evaluation; `phases`: the same in blocks of PHASE_BLOCK_MB, all allocated, then held a while, then all given
    back, each phase's window appended to the file `windows`, so that a timed call can be told apart by the phase
    it overlapped."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    os.setpgrp()
    if kind == "phases":
        log = os.open(windows, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        while True:
            t0 = time.monotonic()
            count = max(1, mb // PHASE_BLOCK_MB)
            blocks = [torch.empty(PHASE_BLOCK_MB << 20, dtype=torch.uint8, device="cuda") for _ in range(count)]
            torch.cuda.synchronize()
            t1 = time.monotonic()
            time.sleep(t1 - t0)
            t2 = time.monotonic()
            del blocks
            torch.cuda.empty_cache()
            t3 = time.monotonic()
            os.write(log, f"alloc {t0} {t1}\nfree {t2} {t3}\n".encode())
            time.sleep(t3 - t2)
    if kind == "malloc":
        while True:
            y = torch.empty(mb << 20, dtype=torch.uint8, device="cuda")
            del y
            torch.cuda.empty_cache()
    while True:
        os.waitpid(_forked(lambda: _child_like(mb, profiled=kind == "profile")), 0)


def _consumer(fd: int) -> None:
    """What a child does on the producer's command, timed: open a shared buffer and copy into it (`buf`: with a
    mapping of its own each time, or with the segment's kept one, as tensors.open_cuda does), or profile a small
    forward (`profile`), and reply with the milliseconds it took."""
    mapped: dict[str, torch.UntypedStorage] = {}
    x = torch.randn(1 << 16, device="cuda")
    while True:
        header, _ = channel.recv(fd, time.monotonic() + 3600)
        if header.get("stop"):
            return
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if header.get("profile"):
            _profile_small(x)
        else:
            dst = open_cuda(header["buf"], mapped)
            dst.fill_(1.0)
            torch.cuda.synchronize()
            del dst
        channel.send(fd, {"ms": (time.perf_counter() - t0) * 1e3, "mapped": len(mapped)})


def _probe(
    op: str, seconds: float, peer: int | None, pool: object, sizes: dict[str, int]
) -> tuple[list[float], list[float]]:
    """Times `op` on this process's GPU, again and again for `seconds`: the milliseconds of each, and when each
    began (the host's monotonic clock, which every process shares)."""
    times: list[float] = []
    began: list[float] = []
    x = torch.randn(1 << 16, device="cuda")
    if op == "timed_kernel":
        src = torch.ones(sizes["kernel_mb"] << 18, device="cuda")
        dst = torch.empty_like(src)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    # From here: the context's creation and the inputs' allocation above, beside neighbours that allocate and give
    # back gigabytes, can take longer than a short probe's `seconds` (the first, of 1 s, then timed nothing).
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        began.append(time.monotonic())
        if op == "timed_kernel":
            torch.cuda.synchronize()
            start.record()
            torch.mul(src, 2.0, out=dst)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
            continue
        if op in ("ipc", "ipc_kept"):
            with torch.cuda.use_mem_pool(pool):
                buf = torch.empty(1 << 16, device="cuda")
            # Not kept: the mapping is opened and closed each time, as every hand-over's was before mappings were kept.
            channel.send(peer, {"buf": share_cuda(buf, keep=op == "ipc_kept")})
            times.append(channel.recv(peer, time.monotonic() + 60)[0]["ms"])
            del buf
            continue
        if op in ("profile", "profile_mapped"):
            channel.send(peer, {"profile": True})
            header, _ = channel.recv(peer, time.monotonic() + 60)
            if (header["mapped"] > 0) != (op == "profile_mapped"):
                raise SystemExit(f"{op} needs the operations in the order {', '.join(OPERATIONS)}")
            times.append(header["ms"])
            continue
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if op == "malloc":
            y = torch.empty(sizes["malloc_mb"] << 20, dtype=torch.uint8, device="cuda")
            del y
            torch.cuda.empty_cache()
        elif op == "event":
            e = torch.cuda.Event(interprocess=True)
            e.record()
            e.ipc_handle()
            del e
        else:
            (x * 2).sum().item()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return times, began


def _start_neighbours(n: int, gpu: int, mb: int, kind: str, windows: str) -> list[int]:
    pids = []
    for _ in range(n):
        pids.append(_forked(lambda: _neighbour(gpu, mb, kind, windows)))
    return pids


def _stop(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _probe_all(ops: list[str], seconds: float, out: int, sizes: dict[str, int]) -> None:
    """In a fresh process on GPU 0 (its consumer forked before CUDA starts): every operation in turn."""
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    mine, theirs = socket.socketpair()
    consumer = _forked(lambda: (mine.close(), _consumer(theirs.fileno())))
    theirs.close()
    pool = torch.cuda.MemPool()
    rows = {}
    for op in ops:
        # The first use (kernels loaded, pool segments made, CUPTI started) apart: a child pays it in every
        # evaluation, since each evaluation's children are fresh.
        first, _ = _probe(op, 1.0, mine.fileno(), pool, sizes)
        steady, began = _probe(op, seconds, mine.fileno(), pool, sizes)
        rows[op] = {"first": first[0], "steady": steady, "began": began}
    channel.send(mine.fileno(), {"stop": True})
    os.waitpid(consumer, 0)
    os.write(out, json.dumps(rows).encode())


def run_condition(
    n: int, gpu: int, kind: str, ops: list[str], seconds: float, sizes: dict[str, int], neighbour_mb: int
) -> tuple[dict, list[tuple[str, float, float]]]:
    """The probe's rows beside `n` neighbours, and the windows of the neighbours' phases (`phases`)."""
    fd, windows = tempfile.mkstemp(prefix="phases-")
    os.close(fd)
    neighbours = _start_neighbours(n, gpu, neighbour_mb, kind, windows)
    try:
        time.sleep(3.0 if n else 0.0)  # the loops past their first start
        read, write = os.pipe()
        pid = _forked(lambda: (os.close(read), _probe_all(ops, seconds, write, sizes)))
        os.close(write)
        with os.fdopen(read, "rb") as f:
            data = f.read()
        if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
            raise SystemExit(f"the probe failed with {n} neighbour(s)")
        rows = json.loads(data)
    finally:
        _stop(neighbours)
    with open(windows) as f:
        found = [(phase, float(a), float(b)) for phase, a, b in (line.split() for line in f)]
    os.unlink(windows)
    return rows, found


def by_phase(ms: list[float], began: list[float], windows: list[tuple[str, float, float]]) -> dict[str, dict]:
    """The calls' milliseconds by the neighbours' phases running when they began: `alloc`, `free`, `both` (one
    neighbour allocating, another giving back) or `neither`."""
    split: dict[str, list[float]] = {"alloc": [], "free": [], "both": [], "neither": []}
    for t, v in zip(began, ms, strict=True):
        running = {phase for phase, a, b in windows if a <= t <= b}
        split["both" if len(running) > 1 else running.pop() if running else "neither"].append(v)
    return {
        phase: {"n": len(v), "median_ms": round(statistics.median(v), 3) if v else None} for phase, v in split.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--neighbours", default="0,2,4", help="comma-separated numbers of churning loops")
    parser.add_argument("--neighbour-gpu", type=int, default=1)
    parser.add_argument("--operations", default=",".join(OPERATIONS))
    parser.add_argument("--seconds", type=float, default=6.0, help="per (neighbours, operation)")
    parser.add_argument("--malloc-mb", type=int, default=64, help="the `malloc` operation's allocation")
    parser.add_argument("--neighbour-mb", type=int, default=4, help="what each neighbour's child hands over")
    parser.add_argument(
        "--neighbour-kind",
        choices=NEIGHBOURS,
        default="child",
        help="children churned (each with a profiler session: profile), allocations given back (malloc), or "
        "allocated and given back in phases told apart (phases)",
    )
    parser.add_argument("--kernel-mb", type=int, default=1024, help="the `timed_kernel` operation's input")
    args = parser.parse_args()
    commit = os.environ.get("KERNELGYM_COMMIT", "")
    ops = args.operations.split(",")
    unknown = sorted(set(ops) - set(OPERATIONS))
    if unknown:
        parser.error(f"unknown operations {unknown}: choose from {', '.join(OPERATIONS)}")
    # This process never touches CUDA: neighbours and probes fork from it with torch imported only.
    for n in (int(v) for v in args.neighbours.split(",")):
        sizes = {"malloc_mb": args.malloc_mb, "kernel_mb": args.kernel_mb}
        rows, windows = run_condition(
            n, args.neighbour_gpu, args.neighbour_kind, ops, args.seconds, sizes, args.neighbour_mb
        )
        for op, row in rows.items():
            ms = row["steady"]
            phases = {"by_phase": by_phase(ms, row["began"], windows)} if args.neighbour_kind == "phases" else {}
            print(
                json.dumps(
                    {
                        "neighbours": n,
                        "neighbour_gpu": args.neighbour_gpu,
                        "malloc_mb": args.malloc_mb,
                        "neighbour_mb": args.neighbour_mb,
                        "neighbour_kind": args.neighbour_kind,
                        "operation": op,
                        "first_ms": round(row["first"], 3),
                        "n": len(ms),
                        "median_ms": round(statistics.median(ms), 3),
                        "p10_ms": round(statistics.quantiles(ms, n=10)[0], 3) if len(ms) > 1 else None,
                        "p90_ms": round(statistics.quantiles(ms, n=10)[-1], 3) if len(ms) > 1 else None,
                        "max_ms": round(max(ms), 3),
                        **phases,
                        "commit": commit,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
