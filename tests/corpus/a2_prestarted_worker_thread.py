"""A2: a worker thread started at import time (before any thread baseline) computes each output after forward returns.

problem: level1/1_ReLU
expect: not_passed
devices: cpu, cuda
catches: no_new_threads, output_stable_after_return

forward only allocates the output and queues (input, output) for the worker, which runs as soon as the main
thread drops the GIL (while the harness replies), i.e. outside the timed window. No thread is created during a
call, so a thread check whose baseline is taken after import misses it; the output also changes after return.
Sound outcomes: rejected (the thread or the late write is seen) or incorrect (the output is read before the
worker has written it); it passes only if the worker always wins the race and nothing looks. On CPU, now and then
the worker and forward's own launch run the Triton interpreter at once, which it does not support (its language
functions then fail with "Did you forget to add @triton.jit ?"): compile_error, the candidate's own error, also
sound; the audit test then skips it by its verdict.
forward also launches its kernel with nothing to do, so a per-call launch check is satisfied.
"""

import queue
import threading

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)


_JOBS: queue.Queue = queue.Queue()


def _worker() -> None:
    while True:
        x, out = _JOBS.get()
        _relu[(triton.cdiv(x.numel(), 4096),)](x, out, x.numel(), BLOCK=4096)


threading.Thread(target=_worker, daemon=True, name="prefetch").start()


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        _relu[(1,)](x, out, 0, BLOCK=4096)  # a launch inside the call, with nothing to do
        _JOBS.put((x, out))
        return out
