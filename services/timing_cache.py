"""Reference timings kept between evaluations, so the reference is not re-timed for every candidate.

The evaluator never trusts a stored timing blindly: each evaluation still times the reference on a few fresh
calls, interleaved with the candidate's, and uses the stored statistics only when their median agrees with the
fresh one (see `EvalSettings.reference_cache_tolerance`); otherwise it times the reference in full and stores
the new figures. Entries are keyed by everything that changes a reference's time: its source (shapes and
dtypes come from its `get_inputs`), the GPU, the library versions and the timing protocol. Where the entries
live (Redis for the service) is the caller's choice: anything with `get` and `put` of strings.
"""

from __future__ import annotations

import hashlib
import json
from typing import Protocol

from pydantic import ValidationError

from services.schema import PROTOCOL_VERSION, Environment, RuntimeStats
from services.settings import EvalSettings


class TimingStore(Protocol):
    def get(self, key: str) -> str | None: ...

    def put(self, key: str, value: str) -> None: ...


def timing_key(reference_source: str, variant: str, env: Environment, settings: EvalSettings) -> str:
    parts = {
        "protocol": PROTOCOL_VERSION,
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
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def load(store: TimingStore, key: str) -> RuntimeStats | None:
    """The stored statistics, or None when absent or unreadable (an unreadable entry is simply re-timed)."""
    raw = store.get(key)
    if raw is None:
        return None
    try:
        return RuntimeStats.model_validate_json(raw)
    except ValidationError:
        return None


def save(store: TimingStore, key: str, runtime: RuntimeStats) -> None:
    store.put(key, runtime.model_dump_json())
