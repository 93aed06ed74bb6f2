"""The training configuration (`kernelgym-rl train --config FILE`, YAML), validated up front."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rl_client.algorithms.rewards import RewardSpec
from rl_client.settings import TurnFiltering


class ServiceConfig(BaseModel):
    """Where and how evaluations are made. A field left out takes `rl_client.settings.RLSettings`' value (the
    environment's, else its default)."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(None, description="KERNELGYM_URL; default http://127.0.0.1:8000.")
    api_key: str | None = Field(None, description="KERNELGYM_API_KEY.")
    device_class: str | None = Field(None, description="KERNELGYM_RL_DEVICE_CLASS; default the service's.")
    options: dict[str, Any] = Field(default_factory=dict, description="EvalOptions for every evaluation.")
    timeout_s: float | None = Field(None, gt=0, description="KERNELGYM_RL_TIMEOUT_S; default 1800.")
    batch_size: int = Field(64, ge=1)
    concurrency: int = Field(32, ge=1)


class ProblemsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: Literal["service", "kernelbench", "parquet"] = "service"
    path: str | None = Field(None, description="Directory (kernelbench) or file (parquet).")
    ids: list[str] | None = None
    reference_column: str = "reference"
    id_column: str | None = None

    @model_validator(mode="after")
    def _path(self) -> ProblemsConfig:
        if self.source != "service" and not self.path:
            raise ValueError(f"problems.path is required for source {self.source!r}")
        return self


class TrainConfig(TurnFiltering):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="A Hugging Face model directory or id available locally.")
    gguf_file: str | None = Field(None, description="Load the model from this GGUF file inside `model`.")
    device: str = "cpu"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    rollout_dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        None,
        description="Sample from a copy of the weights in this dtype (e.g. bfloat16 while training in float32): "
        "a real rollout/training mismatch, as between vLLM and FSDP, for MRS to act on. None: the trained weights.",
    )
    service: ServiceConfig = Field(default_factory=ServiceConfig)
    problems: ProblemsConfig = Field(default_factory=ProblemsConfig)
    reward: RewardSpec = Field(default_factory=RewardSpec, description="The turn reward (default drkernel-pr/v1).")

    steps: int = Field(10, ge=1)
    prompts_per_step: int = Field(16, ge=1)
    samples_per_prompt: int = Field(16, ge=1)
    max_turns: int = Field(3, ge=1)
    max_new_tokens: int = Field(8192, ge=1)
    generate_batch_size: int = Field(16, ge=1, description="Answers sampled together (left-padded).")
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    feedback_chars: int = Field(2000, ge=100)

    optimizer: Literal["adamw", "sgd"] = Field(
        "adamw", description="AdamW (Dr. Kernel's), or plain SGD, which keeps the gradient's scale (estimator studies)."
    )
    lr: float = Field(1e-6, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    mini_batches: int = Field(
        1,
        ge=1,
        description="Optimiser steps per rollout batch, each on a disjoint random share of its turns (PPO "
        "mini-batches; Dr. Kernel: 1). More take more from each batch's generation and scoring; from the second "
        "on, the PPO clip and the dual clip bound how far each moves from the rollout's policy.",
    )
    clip_low: float = Field(0.2, ge=0)
    clip_high: float = Field(0.28, ge=0)
    dual_clip: float = Field(3.0, gt=1)
    loss_scale: float = Field(1000.0, gt=0, description="seq-mean-token-sum divided by this (Dr. Kernel: 1000).")
    gamma: float = Field(1.0, ge=0, le=1)
    advantage: Literal["trloo", "grpo"] = "trloo"
    stop_speedup: float | None = Field(
        None, gt=0, description="End an episode after a turn that passes with a speedup above this (None: never)."
    )

    mrs: bool = True
    mrs_low: float = 0.999
    mrs_high: float = 1.001
    # token_veto, prs, prs_threshold, prs_ramp, failure_mask: TurnFiltering's

    seed: int = 0
    out_dir: str = "runs/kernelgym-rl"
    checkpoint_every: int = Field(0, ge=0, description="Save the model every N steps (0: only at the end).")

    @classmethod
    def load(cls, path: str | Path) -> TrainConfig:
        data = yaml.safe_load(Path(path).read_text()) or {}
        return cls.model_validate(data)
