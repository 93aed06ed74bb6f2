"""TRL's `GRPOTrainer` with Dr. Kernel's TRLOO, PRS and MRS, through the trainer's own hooks (TRL 1.16.0):
`_calculate_rewards` (the gathered rewards of every process) and `_generate_and_score_completions` (the batch the
loss sees: `advantages`, `completion_mask`, `importance_sampling_ratio`).

    trainer = KernelGymGRPOTrainer(model=..., reward_funcs=[KernelGymReward(...)], args=GRPOConfig(...),
                                   train_dataset=..., kernelgym=TRLAlgorithms(estimator="trloo", prs=True))

Each completion is one turn (TRL's tool and environment loops give one completion per sample), so TRLOO is the
leave-one-out baseline over the prompt's other completions: A_i = r_i − mean_{j≠i} r_j, no std.
- A completion for which every reward function returned `None` (`KernelGymReward`: the service failed to judge it)
  leaves the baselines and the loss (its completion mask is cleared), instead of TRL's advantage of 0 that still
  counts in the loss's token count.
- PRS (`prs`): a correct completion of low profiling coverage leaves the loss with `prs_keep`'s probability; its
  reward stays in the others' baselines. It reads `KernelGymReward.last_outcomes`, so a `KernelGymReward` must be
  among `reward_funcs`.
- MRS (`mrs`): `mismatch_rejection` on π_old (TRL's recomputed log-probs) against the sampler's (vLLM's) log-probs:
  a completion outside the band, or with a token under the veto, leaves the loss; survivors are not re-weighted
  (TRL's own importance ratio is set to 1). It needs both log-probs, which TRL computes with `use_vllm=True` and
  `vllm_importance_sampling_correction=True`; without them the step raises.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from pydantic import Field
from trl import GRPOTrainer

from rl_client.adapters.trl import KernelGymReward
from rl_client.algorithms import grpo_advantages, mismatch_rejection, prs_keep, trloo_advantages
from rl_client.settings import TurnFiltering


class TRLAlgorithms(TurnFiltering):
    """The Dr. Kernel parts to apply (`failure_mask` has no effect: a TRL sample is one turn)."""

    estimator: Literal["trloo", "grpo"] = "trloo"
    mrs: bool = False
    mrs_low: float = Field(0.999, gt=0)
    mrs_high: float = Field(1.001, gt=0)
    seed: int = 0


class KernelGymGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` whose advantages, loss mask and importance ratio follow `kernelgym` (see the module doc)."""

    def __init__(self, *args: Any, kernelgym: TRLAlgorithms | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.kernelgym = kernelgym or TRLAlgorithms()
        self._kg_generator = torch.Generator().manual_seed(self.kernelgym.seed)
        self._kg_rewards: torch.Tensor | None = None
        self._kg_reward = next((f for f in self.reward_funcs if isinstance(f, KernelGymReward)), None)
        if self.kernelgym.prs and self._kg_reward is None:
            raise ValueError("PRS reads each completion's coverage from a KernelGymReward: add one to reward_funcs")

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        self._kg_rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        return self._kg_rewards

    def _generate_and_score_completions(self, generation_batch: Any) -> dict[str, Any]:
        output = super()._generate_and_score_completions(generation_batch)
        mode = "train" if self.model.training else "eval"
        group = self.num_generations if mode == "train" else self.num_generations_eval
        return self.apply_algorithms(output, self._kg_rewards, group)

    def apply_algorithms(self, output: dict[str, Any], rewards_per_func: torch.Tensor, group: int) -> dict[str, Any]:
        """`output` (this process's batch) with TRLOO/GRPO advantages from `rewards_per_func` (every process's,
        [N, F], NaN where a function returned None), PRS and MRS applied to its completion mask."""
        cfg = self.kernelgym
        unscorable = torch.isnan(rewards_per_func).all(dim=1).cpu()
        weights = self.reward_weights.to(rewards_per_func.device)
        rewards = (rewards_per_func * weights).nansum(dim=1).cpu().double()
        groups = (torch.arange(len(rewards)) // group).tolist()
        estimator = trloo_advantages if cfg.estimator == "trloo" else grpo_advantages
        advantages = estimator(rewards[:, None], ~unscorable[:, None], groups)[:, 0]
        n = output["completion_mask"].shape[0]
        local = slice(self.accelerator.process_index * n, (self.accelerator.process_index + 1) * n)
        device = output["advantages"].device
        output["advantages"] = advantages[local].to(device=device, dtype=output["advantages"].dtype)
        logged = self._logs["advantages"]  # TRL logged its own advantages for this batch: show these instead
        for _ in range(min(len(advantages), len(logged))):
            logged.pop()
        logged.extend(advantages.tolist())
        keep = ~unscorable[local]
        if cfg.prs:
            keep &= self._prs_keep(n)
        mask = output["completion_mask"] * keep.to(device)[:, None]
        if cfg.mrs:
            mask = mask * self._mrs_keep(output, mask).to(mask.dtype)
            if "importance_sampling_ratio" in output:  # MRS rejects, it does not re-weight
                output["importance_sampling_ratio"] = torch.ones_like(output["importance_sampling_ratio"])
        output["completion_mask"] = mask
        return output

    def _prs_keep(self, n: int) -> torch.Tensor:
        """[n] bool: PRS on this process's completions, from the KernelGymReward's outcomes."""
        outcomes = self._kg_reward.last_outcomes if self._kg_reward else []
        if len(outcomes) != n:
            raise RuntimeError(f"the KernelGymReward scored {len(outcomes)} completions, the batch holds {n}")
        correct = torch.tensor([[o["verdict"] == "passed"] for o in outcomes])
        coverage = torch.tensor([[math.nan if o["coverage"] is None else o["coverage"]] for o in outcomes])
        cfg = self.kernelgym
        return prs_keep(correct, coverage, cfg.prs_threshold, cfg.prs_ramp, self._kg_generator)[:, 0]

    def _mrs_keep(self, output: dict[str, Any], mask: torch.Tensor) -> torch.Tensor:
        """[n, L] bool: the completion tokens MRS keeps (one completion is one trajectory of one turn)."""
        old, sampled = output.get("old_per_token_logps"), output.get("sampling_per_token_logps")
        if old is None or sampled is None:
            raise RuntimeError(
                "MRS compares the trained model's log-probs with the sampler's: TRL computes both only with "
                "use_vllm=True and vllm_importance_sampling_correction=True (or set mrs=False)"
            )
        turn_ids = torch.where(mask.bool(), 0, -1).cpu()
        cfg = self.kernelgym
        result = mismatch_rejection(
            old.detach().cpu().double(), sampled.cpu().double(), turn_ids, cfg.mrs_low, cfg.mrs_high, cfg.token_veto
        )
        self._metrics["train" if self.model.training else "eval"]["kernelgym/mrs_kept"].append(
            result.kept[(turn_ids >= 0).any(dim=1)].double().mean().item()
        )
        return result.keep_tokens.to(mask.device)
