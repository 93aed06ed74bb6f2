"""One role's large receive buffers, kept for an evaluation and handed out again (`keep_large_receive_buffers`).

A child copies each tensor it hands over into a buffer of the parent's, through a CUDA IPC mapping of the buffer's
segment. Opening and closing a mapping go through the host's driver in turn with every other process's mapping
changes on any GPU (docs/benchmarks.md, driver operations), and a large buffer has a segment of its own: a new
buffer per delivery costs an open and a close each time. A buffer of the arena comes back for the next delivery of
its dtype and shape once nothing outside the arena holds its storage, so its segment stays the same and the child
keeps it mapped (services.protocol.tensors.open_cuda). One arena per role: a candidate's mapping never reaches a
segment that held the reference's tensors (docs/security.md).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch


class ReceiveArena:
    """Large receive buffers of one role, allocated in `pool` (a torch.cuda.MemPool, or None: the default one)."""

    def __init__(self, pool: Any, device: str = "cuda") -> None:
        self._pool = pool
        self._device = device
        # Each buffer, and its storage's use count with nothing else holding it (counted at its allocation).
        self._buffers: list[tuple[torch.Tensor, int]] = []

    def take(self, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
        """A buffer of `dtype` and `shape` that nothing else holds: an earlier one where there is one, else a new
        one. A view: whatever the caller derives from it counts as holding it, until dropped."""
        for buf, idle in self._buffers:
            if buf.dtype == dtype and list(buf.shape) == list(shape) and _use_count(buf) <= idle:
                return buf.view(buf.shape)
        with torch.cuda.use_mem_pool(self._pool) if self._pool is not None else nullcontext():
            buf = torch.empty(shape, dtype=dtype, device=self._device)
        self._buffers.append((buf, _use_count(buf)))
        return buf.view(buf.shape)

    def __len__(self) -> int:
        return len(self._buffers)


def _use_count(t: torch.Tensor) -> int:
    """How many tensors and storages hold `t`'s storage."""
    return torch._C._storage_Use_Count(t.untyped_storage()._cdata)
