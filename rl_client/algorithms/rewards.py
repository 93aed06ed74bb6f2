"""Named, versioned reward specifications: a turn's reward from the service's evaluation."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass as validated_dataclass


@validated_dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class RewardSpec:
    """r = c_w·correct + s_w·min(speedup, cap)·correct + v_w·coverage·correct; 0 unless the verdict is `passed`."""

    name: str = "drkernel-pr"
    version: int = 1
    correct_weight: float = 0.5
    speedup_weight: float = 0.5
    speedup_cap: float = 3.0
    coverage_weight: float = 0.5

    def __post_init__(self) -> None:
        # Metrics and logs carry only the id, so an id must name one formula: the defaults above are Dr. Kernel's
        # published reward, and other weights under its name need a name of their own.
        published = {f.name: f.default for f in fields(RewardSpec)}
        if self.name == published["name"] and any(getattr(self, k) != v for k, v in published.items()):
            raise ValueError(
                f"the reward {self.name!r} has fixed weights (Dr. Kernel's); give changed weights a name of their own"
            )

    @property
    def id(self) -> str:
        return f"{self.name}/v{self.version}"


DRKERNEL_PR = RewardSpec()


@dataclass(frozen=True)
class TurnReward:
    reward: float
    correct: float
    speedup: float
    coverage: float
    spec: str

    def as_dict(self) -> dict[str, float | str]:
        return asdict(self)


def turn_reward(
    spec: RewardSpec, verdict: str | None, speedup: float | None = None, coverage: float | None = None
) -> TurnReward:
    """The reward of one turn and its components. Any verdict but `passed` (`rejected` included), and an
    answer that was never evaluated (`verdict` None), earn 0. A missing speedup or coverage (CPU evaluation,
    profiling off) contributes 0."""
    if verdict != "passed":
        return TurnReward(0.0, 0.0, 0.0, 0.0, spec.id)
    c = spec.correct_weight
    s = spec.speedup_weight * min(max(speedup or 0.0, 0.0), spec.speedup_cap)
    v = spec.coverage_weight * min(max(coverage or 0.0, 0.0), 1.0)
    return TurnReward(c + s + v, c, s, v, spec.id)
