"""The warm-child pool: spares are started ahead of need, and the timing phase can wait for them so
that no child is importing torch or creating a CUDA context while another is being timed."""

from __future__ import annotations

import os
import signal
import time

from services.sandbox import ChildPool
from services.settings import EvalSettings


def test_settle_waits_for_spares_and_drops_one_that_died():
    pool = ChildPool(EvalSettings(), size=2)
    try:
        first = pool.acquire("cpu")
        pool.prewarm("cpu")
        spares = list(pool._spare["cpu"])
        assert len(spares) == 2 and first not in spares
        os.killpg(spares[0].proc.pid, signal.SIGKILL)
        spares[0].proc.wait(timeout=10)

        pool.settle("cpu", time.monotonic() + 60)

        assert list(pool._spare["cpu"]) == [spares[1]]
        assert spares[1]._ready and spares[1].proc.poll() is None
        assert pool.acquire("cpu") is spares[1]
        first.close()
    finally:
        pool.close()
