"""One training step of the local backend: multi-turn rollout against the service, TRLOO advantages,
failure-after-success masking, PRS and MRS, then one PPO-clip update (asymmetric clip, dual clip,
sequence-mean of token sums) — the Dr. Kernel recipe on a single device."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import torch

from rl_client.algorithms import (
    failure_after_success_mask,
    grpo_advantages,
    judged_mask,
    mismatch_rejection,
    prs_keep,
    trloo_advantages,
)
from rl_client.config import TrainConfig
from rl_client.data import Problem
from rl_client.local.policy import LocalPolicy, Sample
from rl_client.metrics import fast_p
from rl_client.rollout import Episode, Stop, run_episodes, stop_when_fast
from rl_client.scoring import ServiceScorer


def make_optimizer(cfg: TrainConfig, params: Any) -> torch.optim.Optimizer:
    """The configured optimiser over `params`."""
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


@dataclass
class Batch:
    """The rollout of one step, as tensors: [B, T] per turn, samples[t][i] the tokens of episode i, turn t (None
    where the episode had stopped before turn t: `taken` is false there, and so is every other flag)."""

    episodes: list[Episode]
    samples: list[list[Sample | None]]
    taken: torch.Tensor
    rewards: torch.Tensor
    correct: torch.Tensor
    coverage: torch.Tensor
    speedup: torch.Tensor
    rejected: torch.Tensor
    service_fault: torch.Tensor  # the service gave no verdict, for reasons not the answer's


@dataclass
class Row:
    """One turn of one episode in the loss: its tokens, π_old's log-probs of them, which of them MRS keeps (bool),
    and the turn's advantage."""

    sample: Sample
    old: torch.Tensor
    keep: torch.Tensor
    advantage: float


def policy_loss(
    new: torch.Tensor, old: torch.Tensor, advantage: float, clip_low: float, clip_high: float, dual_clip: float
) -> torch.Tensor:
    """Per-token PPO-clip loss with asymmetric clipping and, for negative advantages, the dual clip."""
    ratio = torch.exp(new - old)
    loss = torch.maximum(-advantage * ratio, -advantage * ratio.clamp(1 - clip_low, 1 + clip_high))
    if advantage < 0:
        loss = torch.minimum(loss, torch.full_like(loss, -advantage * dual_clip))
    return loss


class LocalTrainer:
    def __init__(self, cfg: TrainConfig, policy: LocalPolicy, scorer: ServiceScorer, optimizer: Any):
        self.cfg = cfg
        self.policy = policy
        self.scorer = scorer
        self.optimizer = optimizer
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.mrs_kept = 1.0  # share of trajectories the last step's MRS kept
        self.last_batch: Batch | None = None  # the last step's rollout
        # when an episode ends early (cfg.stop_speedup: once a turn is Fast@p); None: every episode plays max_turns
        self.stop: Stop | None = stop_when_fast(cfg.stop_speedup) if cfg.stop_speedup is not None else None

    def rollout(self, problems: list[Problem]) -> tuple[Batch, dict[str, float]]:
        samples: list[list[Sample]] = []
        gen_s = 0.0

        def generate(histories: list[list[dict[str, str]]]) -> list[str]:
            nonlocal gen_s
            t0 = time.monotonic()
            answers, turn_samples = self.policy.generate(histories)
            gen_s += time.monotonic() - t0
            samples.append(turn_samples)
            return answers

        t0 = time.monotonic()
        episodes = run_episodes(
            problems,
            self.cfg.samples_per_prompt,
            generate,
            self.scorer,
            self.cfg.max_turns,
            self.cfg.feedback_chars,
            self.stop,
        )
        total_s = time.monotonic() - t0
        turns = len(samples)
        # generate saw, at turn t, the episodes still live then, in order: put each sample back at its episode
        aligned: list[list[Sample | None]] = []
        for t, turn_samples in enumerate(samples):
            row: list[Sample | None] = [None] * len(episodes)
            for i, s in zip([i for i, ep in enumerate(episodes) if len(ep.turns) > t], turn_samples, strict=True):
                row[i] = s
            aligned.append(row)

        def per_turn(fn: Any, dtype: torch.dtype = torch.float64, pad: Any = 0) -> torch.Tensor:
            return torch.tensor(
                [[fn(ep.turns[t].outcome) if t < len(ep.turns) else pad for t in range(turns)] for ep in episodes],
                dtype=dtype,
            )

        batch = Batch(
            episodes=episodes,
            samples=aligned,
            taken=torch.tensor([[t < len(ep.turns) for t in range(turns)] for ep in episodes], dtype=torch.bool),
            rewards=per_turn(lambda o: o.reward.reward),
            correct=per_turn(lambda o: o.correct, torch.bool, False),
            coverage=per_turn(lambda o: math.nan if o.coverage is None else o.coverage, pad=math.nan),
            speedup=per_turn(lambda o: math.nan if o.speedup is None else o.speedup, pad=math.nan),
            rejected=per_turn(lambda o: o.verdict == "rejected", torch.bool, False),
            service_fault=per_turn(lambda o: o.service_fault, torch.bool, False),
        )
        return batch, {"time/generate_s": gen_s, "time/score_s": total_s - gen_s}

    def step(self, problems: list[Problem]) -> dict[str, float]:
        cfg = self.cfg
        batch, metrics = self.rollout(problems)
        self.last_batch = batch
        exists = judged_mask(batch.service_fault) & batch.taken
        base = failure_after_success_mask(batch.rewards, exists) if cfg.failure_mask else exists
        groups = [ep.group for ep in batch.episodes]
        estimator = trloo_advantages if cfg.advantage == "trloo" else grpo_advantages
        adv = estimator(batch.rewards, base, groups, cfg.gamma)
        loss_mask = base.clone()
        if cfg.prs:
            loss_mask &= prs_keep(batch.correct, batch.coverage, cfg.prs_threshold, cfg.prs_ramp, self.generator)
        t0 = time.monotonic()
        old, keep = self._old_logprobs_and_mrs(batch)
        metrics.update(self._update(batch, adv, loss_mask, old, keep))
        metrics["time/update_s"] = time.monotonic() - t0
        metrics.update(self._rollout_metrics(batch, exists, base, loss_mask, adv))
        return metrics

    @torch.no_grad()
    def _old_logprobs_and_mrs(self, batch: Batch) -> tuple[list[list[torch.Tensor]], list[list[torch.Tensor]]]:
        """π_old per turn (recomputed by the training forward) and, with MRS, which tokens survive it; a turn not
        taken has empty tensors."""
        self.policy.model.eval()
        computed = iter(self.policy.batched_logprobs([s for turn in batch.samples for s in turn if s is not None]))
        old = [[next(computed).cpu() if s is not None else torch.zeros(0) for s in turn] for turn in batch.samples]
        keep = [
            [torch.ones(len(s.response_ids) if s is not None else 0, dtype=torch.bool) for s in turn]
            for turn in batch.samples
        ]
        if not self.cfg.mrs:
            return old, keep
        turns, n = len(batch.samples), len(batch.episodes)

        def length(t: int, i: int) -> int:
            s = batch.samples[t][i]
            return len(s.response_ids) if s is not None else 0

        lengths = [sum(length(t, i) for t in range(turns)) for i in range(n)]
        width = max(lengths, default=0)
        train = torch.zeros(n, width, dtype=torch.float64)
        rollout = torch.zeros(n, width, dtype=torch.float64)
        turn_ids = torch.full((n, width), -1, dtype=torch.long)
        for i in range(n):
            pos = 0
            for t in range(turns):
                sample = batch.samples[t][i]
                if sample is None:
                    continue
                k = len(sample.response_ids)
                train[i, pos : pos + k] = old[t][i].double()
                rollout[i, pos : pos + k] = sample.rollout_logprobs.double()
                turn_ids[i, pos : pos + k] = t
                pos += k
        result = mismatch_rejection(train, rollout, turn_ids, self.cfg.mrs_low, self.cfg.mrs_high, self.cfg.token_veto)
        for i in range(n):
            pos = 0
            for t in range(turns):
                k = length(t, i)
                keep[t][i] = result.keep_tokens[i, pos : pos + k].clone()
                pos += k
        self.mrs_kept = result.kept.double().mean().item()
        return old, keep

    def _update(
        self,
        batch: Batch,
        adv: torch.Tensor,
        loss_mask: torch.Tensor,
        old: list[list[torch.Tensor]],
        keep: list[list[torch.Tensor]],
    ) -> dict[str, float]:
        rows = [
            Row(sample, old[t][i], keep[t][i], float(adv[i, t]))
            for i in range(len(batch.episodes))
            for t, turn in enumerate(batch.samples)
            if (sample := turn[i]) is not None and loss_mask[i, t] and bool(keep[t][i].any())
        ]
        return self.update_in_mini_batches(rows)

    def update_in_mini_batches(self, rows: list[Row]) -> dict[str, float]:
        """`cfg.mini_batches` optimiser steps, one per disjoint share of `rows` in a random order; their losses and
        gradient norms are averaged."""
        parts = self.cfg.mini_batches
        if parts == 1 or len(rows) < 2:
            return self.update(rows)
        order = torch.randperm(len(rows), generator=self.generator)
        steps = [self.update([rows[j] for j in share.tolist()]) for share in order.tensor_split(min(parts, len(rows)))]
        return {
            "train/loss": sum(m["train/loss"] for m in steps) / len(steps),
            "train/grad_norm": sum(m["train/grad_norm"] for m in steps) / len(steps),
            "train/rows": float(len(rows)),
        }

    def update(self, rows: list[Row]) -> dict[str, float]:
        """One optimiser step on the sequence mean over `rows` of each row's sum of kept tokens' PPO-clip losses
        (divided by `loss_scale`), one forward and backward per micro-batch of the policy's."""
        cfg = self.cfg
        self.policy.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for group in self.policy.micro_batches([row.sample for row in rows]):
            new = self.policy.padded_logprobs([rows[j].sample for j in group])
            sums = [self._token_sum(rows[j], logprobs) for j, logprobs in zip(group, new, strict=True)]
            loss = torch.stack(sums).sum() / (len(rows) * cfg.loss_scale)  # seq-mean of token sums
            loss.backward()
            total += loss.item()
        params = [p for p in self.policy.model.parameters() if p.requires_grad]
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)) if rows else 0.0
        if rows:
            self.optimizer.step()
            self.policy.sync()
        return {"train/loss": total, "train/grad_norm": grad_norm, "train/rows": float(len(rows))}

    def _token_sum(self, row: Row, new: torch.Tensor) -> torch.Tensor:
        """The row's PPO-clip losses summed over the tokens MRS kept."""
        cfg = self.cfg
        tokens = policy_loss(new, row.old.to(new.device), row.advantage, cfg.clip_low, cfg.clip_high, cfg.dual_clip)
        return (tokens * row.keep.to(new.device)).sum()

    def _rollout_metrics(
        self, batch: Batch, exists: torch.Tensor, base: torch.Tensor, loss_mask: torch.Tensor, adv: torch.Tensor
    ) -> dict[str, float]:
        """Rates over the turns the service judged; `rejected/service_fault` is the share it did not."""
        m: dict[str, float] = {}
        judged = ~batch.service_fault & batch.taken
        for t in range(batch.rewards.shape[1]):
            m[f"reward/turn{t + 1}"] = _mean(batch.rewards[:, t], judged[:, t])
            m[f"correct/turn{t + 1}"] = _mean(batch.correct[:, t], judged[:, t])
        turns = [t.outcome for ep in batch.episodes for t in ep.turns if not t.outcome.service_fault]
        m["fast_1.2"] = fast_p(((o.correct, o.speedup) for o in turns), 1.2)
        m["no_code"] = sum(o.verdict is None for o in turns) / len(turns) if turns else math.nan  # never sent
        cov = batch.coverage[~torch.isnan(batch.coverage)]
        m["coverage/mean"] = cov.mean().item() if cov.numel() else math.nan
        m["rejected/verdict"] = _mean(batch.rejected, judged)
        m["rejected/service_fault"] = 1.0 - judged.double().sum().item() / max(1.0, batch.taken.double().sum().item())
        m["turns/mean"] = batch.taken.double().sum(dim=1).mean().item()
        m["rejected/failure_after_success"] = 1.0 - base.double().sum().item() / max(1.0, exists.double().sum().item())
        m["rejected/prs"] = 1.0 - (loss_mask.double().sum() / base.double().sum().clamp(min=1)).item()
        m["mrs/kept"] = self.mrs_kept
        m["advantage/abs_mean"] = adv.abs().mean().item()
        m["advantage/finite"] = float(torch.isfinite(adv).all().item())
        return m


def _mean(values: torch.Tensor, keep: torch.Tensor) -> float:
    """The mean over the kept entries; NaN when none is kept."""
    kept = values[keep].double()
    return kept.mean().item() if kept.numel() else math.nan
