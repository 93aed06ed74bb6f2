"""The RL client's settings from the environment, in one place.

Frameworks call the client's adapters and agents with no arguments of ours (verl imports a bare function, OpenRLHF
instantiates agents inside its Ray actors), so the environment is their only channel. Every variable the client
reads is here:

| variable | `RLSettings` field | default |
|---|---|---|
| `KERNELGYM_URL` | `url`: the service | `http://127.0.0.1:8000` |
| `KERNELGYM_API_KEY` | `api_key` | none |
| `KERNELGYM_RL_DEVICE_CLASS` | `device_class`: the device class evaluations ask for | the service's default |
| `KERNELGYM_RL_TIMEOUT_S` | `timeout_s`: deadline of one evaluation, then it scores 0 | 1800 |
| `KERNELGYM_RL_MAX_TURNS` | `max_turns` of an OpenRLHF agent episode | 3 |
| `KERNELGYM_RL_FEEDBACK_CHARS` | `feedback_chars`: feedback kept in the next prompt | 2000 |
| `KERNELGYM_RL_TURN_FORMAT` | `turn_format`: chat-template text around a feedback turn | ChatML |
| `KERNELGYM_RL_FAULT_RETRIES` | `fault_retries`: the OpenRLHF agent's new tries of a turn left unjudged | 3 |
| `KERNELGYM_RL_FAULT_BACKOFF_S` | `fault_backoff_s`: the agent's first wait before a new try, then doubled | 10 |
| `KERNELGYM_REWARD_ANSWER_WITHIN_S` | `answer_within_s`: how long the OpenRLHF reward server waits before a 504 | 170 |
| `KERNELGYM_RL_TRAINER` | `trainer`: `TrainerSettings` as JSON (`rl_client.openrlhf_train` writes it) | none |

(`KERNELGYM_DEVICE_CLASS` is a worker's own device class, not the client's.) The local backend's YAML
(`rl_client.config.TrainConfig`) names the same things for a training run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from gym_common.settings import ConfigurationError

if TYPE_CHECKING:  # imported lazily: every Ray worker of an OpenRLHF job imports this module
    from rl_client.algorithms.rewards import RewardSpec

SETTINGS_ENV = "KERNELGYM_RL_TRAINER"
CHATML_TURN = "<|im_end|>\n<|im_start|>user\n{feedback}<|im_end|>\n<|im_start|>assistant\n"


class TurnFiltering(BaseModel):
    """Which turns leave the loss, the same for both backends (the local trainer's YAML and OpenRLHF's
    `--kernelgym.*` arguments): the MRS token veto, profiling-based rejection sampling and the
    failure-after-success mask (docs/rl.md)."""

    model_config = ConfigDict(extra="forbid")

    token_veto: float = Field(1e-4, ge=0, description="Mask a turn with a token whose π_train/π_rollout < this.")
    prs: bool = True
    prs_threshold: float = Field(0.3, ge=0, description="Coverage at or below which a correct turn is rejected.")
    prs_ramp: float = Field(0.1, gt=0, description="Width of the linear ramp above the threshold.")
    failure_mask: bool = Field(True, description="Mask a failed turn that follows a correct one.")


class TrainerSettings(TurnFiltering):
    """What the replaced OpenRLHF advantage computation does; travels to the Ray workers as JSON in
    KERNELGYM_RL_TRAINER."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    estimator: Literal["trloo"] | None = None  # None: OpenRLHF's own estimator

    def to_json(self) -> str:
        return self.model_dump_json()


class RLSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="KERNELGYM_RL_", frozen=True, extra="ignore", validate_by_name=True, validate_by_alias=True
    )

    url: str = Field("http://127.0.0.1:8000", validation_alias="KERNELGYM_URL")
    api_key: str | None = Field(None, validation_alias="KERNELGYM_API_KEY")
    device_class: str | None = None
    timeout_s: float = Field(1800.0, gt=0)
    max_turns: int = Field(3, ge=1)
    feedback_chars: int = Field(2000, ge=0)
    turn_format: str = CHATML_TURN
    fault_retries: int = Field(3, ge=0)
    fault_backoff_s: float = Field(10.0, ge=0)
    answer_within_s: float = Field(170.0, gt=0, validation_alias="KERNELGYM_REWARD_ANSWER_WITHIN_S")
    trainer: TrainerSettings = TrainerSettings()

    @classmethod
    def from_env(cls, **overrides: Any) -> RLSettings:
        """The settings the environment gives, then `overrides` that are not None on top; a ConfigurationError
        names each unusable variable."""
        try:
            return cls(**{k: v for k, v in overrides.items() if v is not None})
        except ValidationError as exc:
            prefix, known = cls.model_config["env_prefix"], cls.variables()
            problems = []
            for error in exc.errors():
                where = str(error["loc"][0]) if error["loc"] else "*"
                variable = where if where in known else f"{prefix}{where}".upper()
                problems.append(f"{variable}: {error['msg']}")
            raise ConfigurationError("; ".join(problems)) from None
        except SettingsError:  # the one JSON value is not JSON
            raise ConfigurationError(f"{SETTINGS_ENV}: not a JSON object of TrainerSettings") from None

    @classmethod
    def variables(cls) -> set[str]:
        """Every environment variable these settings read."""
        prefix = cls.model_config["env_prefix"]
        return {str(f.validation_alias or f"{prefix}{name}".upper()) for name, f in cls.model_fields.items()}

    def scorer(self, spec: RewardSpec | None = None, timeout_s: float | None = None, cancel_late: bool = True) -> Any:
        """A `ServiceScorer` on a new client of the service, with `spec` (default `drkernel-pr/v1`)."""
        from gym_client import KernelGymClient
        from rl_client.algorithms.rewards import DRKERNEL_PR
        from rl_client.scoring import ServiceScorer

        client = KernelGymClient(self.url, api_key=self.api_key, timeout=60)
        return ServiceScorer(
            client,
            spec or DRKERNEL_PR,
            device_class=self.device_class,
            timeout_s=timeout_s or self.timeout_s,
            cancel_late=cancel_late,
        )
