"""Turn-level TRLOO, the token veto and PRS inside OpenRLHF's experience maker.

`compute_advantages_and_returns` replaces `RemoteExperienceMaker.compute_advantages_and_returns` (OpenRLHF 0.11.2;
installed by `rl_client.openrlhf_train`). It is called with the rollout batch as OpenRLHF's micro-batches
(`Experience` objects whose `index` lists each trajectory's position in the batch, whose `info` holds the agent's
`extra_logs` and whose `action_log_probs` the actor has just computed), and it sets each one's `advantages`,
`returns` and `action_mask`:

- turn rewards come from `info["turn_reward_k"]` and `info["num_turns"]` (`rl_client/openrlhf_agent.py`), turn
  spans from the runs of `action_mask`, groups from `index // n_samples_per_prompt`;
- the advantage of a turn is its TRLOO advantage (return-to-go minus the mean of the other samples of the same
  prompt at the same turn), on every token of that turn; no whitening;
- a trajectory with a turn the service failed to judge (`turn_fault_k`) leaves the loss and the baselines whole,
  as in the local trainer: its returns are unknown;
- turns leave the loss (their tokens leave `action_mask`) when they are a failure after success, when PRS rejects
  them (a correct turn is kept with probability clip((coverage − 0.3)/0.1, 0, 1)), or when one of their tokens has
  π_train/π_rollout below the veto threshold. PRS and the veto leave the baselines as they are.

The trajectory-level mismatch band (MRS) is OpenRLHF's own `--algo.advantage.is_correction_*`, applied in its
policy loss.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import torch

from rl_client.algorithms import judged_mask, mismatch_rejection, prs_keep
from rl_client.settings import RLSettings, TrainerSettings
from rl_client.turn_tokens import token_advantages, turn_ids

log = logging.getLogger(__name__)

ORIGINAL = "_kernelgym_original_compute_advantages_and_returns"  # where `install` keeps OpenRLHF's method

_generator: torch.Generator | None = None


def install(maker_cls: type) -> None:
    """Put `compute_advantages_and_returns` on OpenRLHF's `RemoteExperienceMaker`, keeping the original beside it
    (`install` twice changes nothing)."""
    current = maker_cls.__dict__["compute_advantages_and_returns"]
    if current is compute_advantages_and_returns:
        return
    setattr(maker_cls, ORIGINAL, current)
    maker_cls.compute_advantages_and_returns = compute_advantages_and_returns


def compute_advantages_and_returns(self: Any, experiences: list[Any]) -> list[Any]:
    """The replacement method: TRLOO when KERNELGYM_RL_TRAINER says so, OpenRLHF's own estimator otherwise."""
    settings = RLSettings.from_env().trainer
    if settings.estimator != "trloo":
        return getattr(self, ORIGINAL)(experiences)
    args = self.strategy.args
    check_args(args)
    return trloo_experiences(
        experiences, args.rollout.n_samples_per_prompt, settings, args.algo.advantage.gamma, _prs_generator(args)
    )


def check_args(args: Any) -> None:
    """What TRLOO needs from OpenRLHF's parsed arguments (also checked on the command line by the entry point)."""
    if args.rollout.n_samples_per_prompt < 2:
        raise ValueError("trloo needs --rollout.n_samples_per_prompt > 1")
    if args.algo.kl.init_coef > 0 and not args.algo.kl.use_loss:
        raise ValueError("trloo puts no KL penalty into the rewards: use --algo.kl.init_coef 0 or --algo.kl.use_loss")
    if args.reward.overlong_buffer_len is not None or args.reward.stop_properly_penalty_coef is not None:
        raise ValueError("length penalties change the summed reward, which trloo does not use")


def _prs_generator(args: Any) -> torch.Generator:
    global _generator
    if _generator is None:
        _generator = torch.Generator().manual_seed(int(args.train.seed))
    return _generator


def _padded(tensors: Sequence[torch.Tensor], width: int) -> torch.Tensor:
    """Right-pad [b, w] tensors with zeros (False) to `width` and stack their rows."""
    return torch.cat([torch.cat([t, t.new_zeros(t.shape[0], width - t.shape[1])], dim=1) for t in tensors])


def _per_turn(experiences: Sequence[Any], prefix: str, turns: int) -> torch.Tensor:
    """[N, K] float64 from the per-trajectory info entries `prefix1..prefixK`."""
    columns = [torch.cat([e.info[f"{prefix}{k}"].reshape(-1) for e in experiences]) for k in range(1, turns + 1)]
    return torch.stack(columns, dim=1).double()


@torch.no_grad()
def trloo_experiences(
    experiences: list[Any],
    n_samples_per_prompt: int,
    settings: TrainerSettings,
    gamma: float = 1.0,
    generator: torch.Generator | None = None,
) -> list[Any]:
    """Set `advantages`, `returns` and `action_mask` of OpenRLHF `Experience` micro-batches from the agent's per-turn
    rewards (see the module docstring); also adds per-trajectory counts to `info` for OpenRLHF's logs."""
    first = experiences[0].info
    turns = 0
    while f"turn_reward_{turns + 1}" in first:
        turns += 1
    if turns == 0 or "num_turns" not in first:
        raise ValueError(
            "trloo needs each turn's reward in the experience info (turn_reward_1.., num_turns): train with "
            "--train.agent_func_path rl_client/openrlhf_agent.py"
        )
    widths = [e.action_mask.shape[1] for e in experiences]
    width = max(widths)
    action_mask = _padded([e.action_mask.bool() for e in experiences], width)
    rewards = _per_turn(experiences, "turn_reward_", turns)
    num_turns = torch.cat([e.info["num_turns"].reshape(-1) for e in experiences]).round().long()
    groups = [i // n_samples_per_prompt for e in experiences for i in e.index]
    exists = torch.arange(turns)[None, :] < num_turns[:, None]
    keep = torch.ones_like(exists)

    vetoed = torch.zeros_like(exists)
    if settings.token_veto > 0:
        if any(e.rollout_log_probs is None or e.action_log_probs is None for e in experiences):
            raise ValueError(
                "the token veto needs vLLM's log-probs: set --algo.advantage.is_correction_level, or "
                "--kernelgym.token_veto 0"
            )
        ids = turn_ids(action_mask, num_turns)
        train = _padded([e.action_log_probs.float() for e in experiences], width)
        rollout = _padded([e.rollout_log_probs.float() for e in experiences], width)
        found = mismatch_rejection(train, rollout, ids, 0.0, math.inf, settings.token_veto).vetoed_turns
        vetoed[:, : found.shape[1]] = found
        keep &= ~vetoed

    prs_rejected = torch.zeros_like(exists)
    if settings.prs:
        correct = (_per_turn(experiences, "turn_correct_", turns) > 0.5) & exists
        coverage = _per_turn(experiences, "turn_coverage_", turns)
        coverage = torch.where(coverage < 0, torch.full_like(coverage, math.nan), coverage)  # −1: not profiled
        kept = prs_keep(correct, coverage, settings.prs_threshold, settings.prs_ramp, generator)
        prs_rejected = ~kept
        keep &= kept

    faulted = torch.zeros_like(exists)
    if "turn_fault_1" in first:
        faulted = (_per_turn(experiences, "turn_fault_", turns) > 0.5) & exists
    judged = judged_mask(faulted)

    out = token_advantages(action_mask, rewards, num_turns, groups, gamma, keep, settings.failure_mask, judged)
    loss_mask = out.loss_mask
    if not loss_mask.any():
        # Every turn left the loss: a step with no tokens would divide by zero in OpenRLHF's token mean, so keep
        # the tokens and give them no advantage (a step without gradient).
        log.warning("trloo: every turn of this batch left the loss; this step makes no update")
        loss_mask = action_mask
        advantages = torch.zeros_like(out.advantages)
    else:
        advantages = out.advantages

    first_row = 0
    for e, w in zip(experiences, widths, strict=True):
        rows = slice(first_row, first_row + e.action_mask.shape[0])
        first_row = rows.stop
        device = e.action_mask.device
        e.advantages = advantages[rows, :w].float().to(device)
        e.returns = out.returns[rows, :w].float().to(device)
        e.action_mask = torch.where(loss_mask[rows, :w].to(device), e.action_mask, torch.zeros_like(e.action_mask))
        live = out.in_baseline[rows]
        e.info["return"] = rewards[rows].sum(dim=1).float()
        e.info["trloo/turns_in_loss"] = out.in_loss[rows].sum(dim=1).float()
        e.info["trloo/failure_after_success_turns"] = (exists[rows] & judged[rows] & ~live).sum(dim=1).float()
        e.info["trloo/service_fault_turns"] = (exists[rows] & ~judged[rows]).sum(dim=1).float()
        e.info["trloo/vetoed_turns"] = (vetoed[rows] & live).sum(dim=1).float()
        e.info["trloo/prs_rejected_turns"] = (prs_rejected[rows] & live).sum(dim=1).float()
        e.kl = None
    return experiences
