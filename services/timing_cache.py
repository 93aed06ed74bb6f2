"""Reference timings kept between evaluations, so a problem's reference is timed once, not for every candidate.

A stored timing is the reference's time over several child processes (the mean of their medians, with each
process's median; see `services.parent.timing`). The evaluator never trusts it blindly: each evaluation still
times the reference on a few fresh calls, interleaved with the candidate's, and uses the stored statistics unless
the fresh median is, with 95% confidence, outside the range of the stored per-process medians (widened by
`EvalSettings.reference_cache_tolerance`); otherwise it times the reference again, in several processes, and
stores the new figures once the evaluation passed, unless the processes other than its own agree with the stored
figure after all (that process's offset was no drift: the stored figure stands). Entries are keyed by everything
that changes a reference's time: its source (shapes and dtypes come from its `get_inputs`), the GPU, the driver
and library versions and the timing protocol. Where the entries live (Redis for the service) is the caller's
choice: anything with the `TimingStore` methods.

Candidates of one problem arrive together (in RL, 16 or more per prompt), and timing a reference in several
processes is the most expensive thing an evaluation does. So a reference not yet stored is timed by one
evaluation at a time: the first to miss it claims it, and the others wait (outside the timing slot) until its
figure is stored, or until the claim is gone because that evaluation failed or died, and then claim it themselves.
A claim is a lease of `CLAIM_TTL_S` that a thread of its holder renews until the evaluation ends, so a holder
killed outright delays the others by at most that.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from typing import Protocol

from pydantic import ValidationError

from services.schema import PROTOCOL_VERSION, Environment, RuntimeStats
from services.settings import EvalSettings

# How often an evaluation waiting for another's reference timing looks for it.
_WAIT_POLL_S = 0.1
# How long a claim outlives its holder's last renewal; renewed four times as often.
CLAIM_TTL_S = 10.0


class TimingStore(Protocol):
    def get(self, key: str) -> str | None: ...

    def put(self, key: str, value: str) -> None: ...

    def claim(self, key: str, owner: str, ttl_s: float) -> bool:
        """Take the claim on timing `key` for `owner`, or renew it when `owner` holds it; False while another
        owner's claim is live."""
        ...

    def unclaim(self, key: str, owner: str) -> None:
        """Drop `owner`'s claim on `key` (nothing when another owner holds it)."""
        ...


class MemoryTimingStore(dict[str, str]):
    """A TimingStore in one process's memory, shared by the evaluations of one run (benchmarks, tests); the
    service keeps its timings in Redis (`gym_worker.tasks.RedisTimingStore`)."""

    def __init__(self, *args: object, **kwargs: str):
        super().__init__(*args, **kwargs)
        self._claims: dict[str, tuple[str, float]] = {}  # key -> (owner, when the claim expires)
        self._lock = threading.Lock()

    def put(self, key: str, value: str) -> None:
        self[key] = value

    def claim(self, key: str, owner: str, ttl_s: float) -> bool:
        now = time.monotonic()
        with self._lock:
            holder, until = self._claims.get(key, (owner, now))
            if holder != owner and until > now:
                return False
            self._claims[key] = (owner, now + ttl_s)
            return True

    def unclaim(self, key: str, owner: str) -> None:
        with self._lock:
            if self._claims.get(key, ("", 0.0))[0] == owner:
                del self._claims[key]


# How a stored figure was reduced from its calls; changing the reduction makes earlier entries unreachable.
REDUCTION = "processes:mean,placements:fastest"


def timing_key(reference_source: str, variant: str, env: Environment, settings: EvalSettings) -> str:
    parts = {
        "protocol": PROTOCOL_VERSION,
        "reduction": REDUCTION,
        "source": hashlib.sha256(reference_source.encode()).hexdigest(),
        "variant": variant,
        "device": env.device,
        "gpu": env.gpu_name,
        "driver": env.driver,
        "cuda": env.cuda,
        "torch": env.torch,
        "triton": env.triton,
        "l2_flush_factor": settings.l2_flush_factor,
        "launch_shield_cycles": settings.launch_shield_cycles,
        "timing_placements": settings.timing_placements,
        "placement_min_mb": settings.placement_min_mb,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def load(store: TimingStore, key: str) -> RuntimeStats | None:
    """The stored statistics, or None when absent, unreadable or inconsistent (such an entry is re-timed)."""
    raw = store.get(key)
    if raw is None:
        return None
    try:
        stored = RuntimeStats.model_validate_json(raw)
    except ValidationError:
        return None
    medians = stored.process_medians_ms
    if stored.median_ms <= 0 or (medians and not min(medians) <= stored.median_ms <= max(medians)):
        return None  # not a mean of its own per-process medians: corrupted
    return stored


def save(store: TimingStore, key: str, runtime: RuntimeStats) -> None:
    store.put(key, runtime.model_dump_json())


class Lookup:
    """One evaluation's view of the store: the stored statistics of its reference sides, the claims on those
    it must time itself, and, once the evaluation passed, the saving of the sides it timed in full."""

    def __init__(
        self, store: TimingStore | None, reference_source: str, env: Environment, settings: EvalSettings, owner: str
    ):
        self.store = store
        self.reference_source = reference_source
        self.env = env
        self.settings = settings
        self.owner = owner
        self.keys: dict[str, str] = {}  # reference side -> its key in the store
        self.claimed: list[str] = []  # keys this evaluation holds the claim on
        self.waited_s = 0.0  # waiting for another evaluation's figure (`load`)
        self._done = threading.Event()
        self._renewer: threading.Thread | None = None

    def load(self, variants: dict[str, str], stop: Callable[[], None]) -> dict[str, RuntimeStats]:
        """The stored statistics of each reference side (side -> variant) that has them. A side not stored is
        claimed, or waited for while another evaluation holds its claim; `stop` raises to end a wait (a
        cancellation)."""
        if self.store is None:
            return {}
        found = {}
        for side, variant in variants.items():
            key = self.keys[side] = timing_key(self.reference_source, variant, self.env, self.settings)
            refused_at = None
            while (cached := load(self.store, key)) is None:
                if self.store.claim(key, self.owner, CLAIM_TTL_S):
                    self._hold(key)
                    break
                refused_at = refused_at or time.monotonic()
                stop()
                time.sleep(_WAIT_POLL_S)
            if refused_at is not None:
                self.waited_s += time.monotonic() - refused_at
            if cached is not None:
                found[side] = cached
        return found

    def _hold(self, key: str) -> None:
        self.claimed.append(key)
        if self._renewer is None:
            self._renewer = threading.Thread(target=self._renew, name="kg-timing-claim", daemon=True)
            self._renewer.start()

    def _renew(self) -> None:
        while not self._done.wait(CLAIM_TTL_S / 4):
            for key in list(self.claimed):
                self.store.claim(key, self.owner, CLAIM_TTL_S)

    def release(self) -> None:
        """Drop the claims, whether or not a figure was stored: a waiting evaluation then finds it or claims it."""
        self._done.set()
        if self._renewer is not None:
            self._renewer.join()
        for key in self.claimed:
            self.store.unclaim(key, self.owner)
        self.claimed.clear()

    def save(self, runtimes: dict[str, RuntimeStats], from_cache: list[str]) -> None:
        """Store the sides timed in full. Only an evaluation that passed every check calls this: a candidate
        that disturbed the reference's calls is rejected, and its figures never reach another evaluation."""
        for side, key in self.keys.items():
            if side in runtimes and side not in from_cache:
                save(self.store, key, runtimes[side])
