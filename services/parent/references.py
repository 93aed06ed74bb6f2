"""Reference children kept between evaluations of the same problem.

Every evaluation started two fresh children, and each child's CUDA context, device-memory setup and teardown is a
mapping change that the host's NVIDIA driver takes in turn with every other process's, on any GPU (docs/benchmarks.md):
on a host of two GPUs those waits, not the GPUs, bounded the evaluations a minute. The reference's child
runs the problem's code, never a candidate's, so it can serve the next candidate of its problem with a fresh job
(new nonce, seeds and model: services.child.boot); the candidate's child is still discarded after each evaluation.
Only a reference whose tensors were small is kept (its idle memory is its context and cache), and only one that
answered every command, including the release of its last tensors.
"""

from __future__ import annotations

from collections import OrderedDict

from services.problems import Problem
from services.sandbox import Child

# Jobs one reference child serves at most: whatever a job leaves behind that a fresh runtime does not drop (its
# caching allocator's fragmentation, caches of torch and Python) grows for a bounded time only.
MOST_JOBS = 64


class KeptReferences:
    """At most `most` idle reference children, by the problem they serve (least recently used goes first)."""

    def __init__(self, most: int):
        self.most = most
        self._idle: OrderedDict[tuple[str, str], Child] = OrderedDict()

    @staticmethod
    def key(device: str, problem: Problem) -> tuple[str, str]:
        return device, problem.digest

    def take(self, key: tuple[str, str]) -> Child | None:
        """The idle child kept for `key`. One that died meanwhile (any process of this user may kill it) is found
        when its job starts (services.parent.load.start_children)."""
        return self._idle.pop(key, None)

    def keep(self, key: tuple[str, str], child: Child) -> None:
        if child.jobs >= MOST_JOBS:
            child.close()
            return
        old = self._idle.pop(key, None)
        if old is not None:
            old.close()
        self._idle[key] = child
        while len(self._idle) > self.most:
            self._idle.popitem(last=False)[1].close()

    def close(self) -> None:
        """Close every kept child (the device is needed to itself, or the evaluator ends)."""
        while self._idle:
            self._idle.popitem()[1].close()
