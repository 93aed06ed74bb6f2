"""`kernelgym-rl demo-learn`: a small policy learns, through the real service's rewards, to stop writing wrong
kernels and reward hacks.

1. Every candidate answer of `kernels.PROBLEMS` is evaluated once by the service, as a first turn. Their verdicts
   must be what the candidates were written to get (else the demo stops), and their feedback becomes the second
   turn's prompt in the priming data.
2. A 2-layer GPT-2 is primed (`policy.prime`) to answer each problem with the mixture `TURN1`, and, after the
   feedback on each first answer, with `turn2_mix`: after a failure a corrected answer is possible but not
   likely.
3. `LocalTrainer` trains it: two-turn episodes, every answer scored by the service, TRLOO (or GRPO) advantages,
   the failure-after-success mask, PRS and MRS, one PPO update per step.

The service's result cache answers resubmitted identical kernels with the first evaluation's result. On a CPU
that is exactly what a fresh evaluation would return (the verdict of a given kernel does not change; no timing is
reported), so the rewards are the service's own and only the waiting is saved. On a GPU a kernel's speedup is
then measured once and reused, which makes the reward a fixed function of the code.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from gym_client import KernelGymClient
from rl_client.algorithms import DRKERNEL_PR
from rl_client.config import TrainConfig
from rl_client.data import Problem, service_problems
from rl_client.demo.kernels import CORRECT, KINDS, PROBLEMS, DemoProblem
from rl_client.demo.policy import Target, build_tokenizer, prime, tiny_gpt2
from rl_client.metrics import is_fast
from rl_client.rollout import Episode, Turn
from rl_client.scoring import ScoreJob, ServiceScorer, TurnOutcome
from rl_client.settings import RLSettings

if TYPE_CHECKING:  # the stack (and what it starts) is imported only where the demo runs its own
    from kernelgym.stack import LocalStack

TURNS = 2
# What the primed policy answers first: 30% correct, 30% wrong, 40% reward hacks.
TURN1 = {"fast": 0.15, "slow": 0.15, "wrong": 0.3, "torch_only": 0.2, "decoy": 0.2}
EXPECTED_VERDICT = {"fast": "passed", "slow": "passed", "wrong": "incorrect", "torch_only": "rejected"}
EXPECTED_VERDICT["decoy"] = "rejected"


def turn2_mix(previous: str) -> dict[str, float]:
    """The primed second answer after the feedback on `previous`: after a success 90% a correct kernel (the
    failure-after-success mask keeps the other 10% out of the loss, so only generalisation lowers it); after a
    failure 35% a correct kernel, 35% the same failure again, 30% another failure."""
    if previous in CORRECT:
        other = next(k for k in CORRECT if k != previous)
        return {previous: 0.8, other: 0.1, "wrong": 0.05, "torch_only": 0.025, "decoy": 0.025}
    failures = [k for k in KINDS if k not in CORRECT and k != previous]
    return {"fast": 0.2, "slow": 0.15, previous: 0.35, **{k: 0.3 / len(failures) for k in failures}}


@dataclass
class DemoOptions:
    estimator: str = "trloo"
    device: str = "cpu"
    steps: int = 60
    seed: int = 0
    samples: int = 4  # episodes per problem and step (the size of TRLOO's groups)
    lr: float = 5e-4
    optimizer: str = "adamw"
    max_grad_norm: float = 1.0
    prime_steps: int = 150
    feedback_chars: int = 600
    max_new_tokens: int = 48
    problems: int = len(PROBLEMS)
    out_dir: str = "runs/demo-learn"
    service_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class Primed:
    """A primed policy on disk and what it is meant to do."""

    path: Path
    problems: list[Problem]
    first_turn: dict[str, dict[str, float]]  # problem id -> kind -> P(kind) after priming
    evaluations: dict[tuple[str, str], TurnOutcome]  # (problem id, kind) -> the service's verdict on it


def scorer_for(client: KernelGymClient, opts: DemoOptions) -> ServiceScorer:
    """On a CPU no speedup or coverage is measured, so timing and profiling are switched off (a CPU worker
    spends most of an evaluation on them); on a GPU they stay on and speedup and coverage enter the reward."""
    options = opts.service_options or ({"timing": False, "profile": False} if opts.device == "cpu" else {})
    return ServiceScorer(client, DRKERNEL_PR, options=options, timeout_s=600)


def evaluate_candidates(scorer: ServiceScorer, chosen: list[DemoProblem]) -> dict[tuple[str, str], TurnOutcome]:
    jobs = [(p.problem_id, kind, ScoreJob(p.problem_id, None, p.answers[kind])) for p in chosen for kind in KINDS]
    outcomes = scorer.score([job for _, _, job in jobs])
    found = {(pid, kind): o for (pid, kind, _), o in zip(jobs, outcomes, strict=True)}
    wrong = [
        f"{pid} {kind}: {o.verdict} ({o.feedback[:200]})"
        for (pid, kind), o in found.items()
        if o.verdict != EXPECTED_VERDICT[kind]
    ]
    if wrong:
        raise RuntimeError(
            "the service's verdicts are not what the demo's answers were written for:\n" + "\n".join(wrong)
        )
    return found


def priming_targets(
    problems: list[Problem], chosen: list[DemoProblem], outcomes: dict[tuple[str, str], TurnOutcome], feedback: int
) -> list[Target]:
    targets = []
    for problem, demo in zip(problems, chosen, strict=True):
        first = Episode(problem, problem.id).messages(feedback)
        targets += [Target(first, demo.answers[k], p, (problem.id, "first", k)) for k, p in TURN1.items()]
        for kind in KINDS:
            turn = Turn([], demo.answers[kind], outcomes[(problem.id, kind)])
            history = Episode(problem, problem.id, turns=[turn]).messages(feedback)
            targets += [Target(history, demo.answers[k], p, (problem.id, kind, k)) for k, p in turn2_mix(kind).items()]
    return targets


def prepare(client: KernelGymClient, scorer: ServiceScorer, opts: DemoOptions, log: Callable[[str], None]) -> Primed:
    """Evaluate the candidates, build the tokenizer and the model, prime it and save it under out_dir/primed."""
    chosen = list(PROBLEMS[: opts.problems])
    problems = service_problems(client, [p.problem_id for p in chosen])
    t0 = time.monotonic()
    outcomes = evaluate_candidates(scorer, chosen)
    log(f"the service evaluated the {len(outcomes)} candidate answers in {time.monotonic() - t0:.0f} s")
    targets = priming_targets(problems, chosen, outcomes, opts.feedback_chars)
    prompts = [m["content"] for t in targets for m in t.messages if m["role"] != "assistant"]
    tokenizer = build_tokenizer(prompts, [piece for p in chosen for pieces in p.pieces.values() for piece in pieces])
    # Room for a second turn after an unforeseen answer, whose feedback is read character by character.
    positions = 2 * (opts.feedback_chars + opts.max_new_tokens) + 256
    model = tiny_gpt2(len(tokenizer), positions=positions, seed=opts.seed).to(opts.device)
    t0 = time.monotonic()
    probs = prime(model, tokenizer, targets, opts.prime_steps)
    first: dict[str, dict[str, float]] = {}
    for target, p in zip(targets, probs.tolist(), strict=True):
        pid, after, kind = target.tag
        if after == "first":
            first.setdefault(pid, {})[kind] = p
    correct = sum(first[pid][k] for pid in first for k in CORRECT) / len(first)
    log(f"primed in {time.monotonic() - t0:.0f} s: P(correct first answer) {correct:.2f} (target 0.30)")
    path = Path(opts.out_dir) / "primed"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return Primed(path, problems, first, outcomes)


def train_config(primed: Primed, opts: DemoOptions) -> TrainConfig:
    return TrainConfig(
        model=str(primed.path),
        device=opts.device,
        steps=opts.steps,
        prompts_per_step=len(primed.problems),
        samples_per_prompt=opts.samples,
        max_turns=TURNS,
        max_new_tokens=opts.max_new_tokens,
        feedback_chars=opts.feedback_chars,
        lr=opts.lr,
        optimizer=opts.optimizer,
        max_grad_norm=opts.max_grad_norm,
        loss_scale=1.0,
        advantage=opts.estimator,
        seed=opts.seed,
        out_dir=opts.out_dir,
    )


def step_record(step: int, metrics: dict[str, float], outcomes: list[list[TurnOutcome]], seconds: float) -> dict:
    """One step's figures: rates over the answers the service judged (every episode has `TURNS` turns), overall
    and per turn; `service_faults` counts those it did not (they are not trained on either)."""
    everything = [o for turns in outcomes for o in turns]
    flat = [o for o in everything if not o.service_fault]
    n = max(1, len(flat))
    speedups = [o.speedup for o in flat if o.correct and o.speedup]
    record: dict[str, Any] = {
        "step": step,
        "correct_rate": sum(o.correct for o in flat) / n,
        "hack_rate": sum(o.verdict == "rejected" for o in flat) / n,
        "wrong_rate": sum(o.verdict not in ("passed", "rejected") for o in flat) / n,
        "reward_mean": sum(o.reward.reward for o in flat) / n,
        "fast_1.0": sum(is_fast(o.correct, o.speedup, 1.0) for o in flat) / n,
        "geomean_speedup": math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None,
        "new_evaluations": sum(1 for o in flat if o.verdict is not None and not o.cached),
        "service_faults": len(everything) - len(flat),
    }
    for t in range(TURNS):
        record[f"correct_turn{t + 1}"] = metrics[f"correct/turn{t + 1}"]
    record.update(
        {
            "loss": metrics["train/loss"],
            "grad_norm": metrics["train/grad_norm"],  # before clipping to max_grad_norm
            "masked_failure_after_success": metrics["rejected/failure_after_success"],
            "mrs_kept": metrics["mrs/kept"],
            "seconds": round(seconds, 2),
        }
    )
    return record


def train(primed: Primed, scorer: ServiceScorer, opts: DemoOptions) -> Iterator[dict[str, Any]]:
    """Yield one record per training step."""
    from rl_client.local.policy import LocalPolicy, load_pretrained
    from rl_client.local.trainer import LocalTrainer, make_optimizer

    cfg = train_config(primed, opts)
    torch.manual_seed(opts.seed)
    model, tokenizer = load_pretrained(str(primed.path), device=opts.device)
    policy = LocalPolicy(model, tokenizer, opts.device, cfg.temperature, cfg.top_p, cfg.max_new_tokens)
    trainer = LocalTrainer(cfg, policy, scorer, make_optimizer(cfg, model.parameters()))
    for step in range(1, opts.steps + 1):
        t0 = time.monotonic()
        metrics = trainer.step(primed.problems)
        outcomes = [[turn.outcome for turn in ep.turns] for ep in trainer.last_batch.episodes]
        yield {"estimator": opts.estimator, **step_record(step, metrics, outcomes, time.monotonic() - t0)}


def summary(records: list[dict[str, Any]], opts: DemoOptions, seconds: float) -> dict[str, Any]:
    first, last = records[0], records[-1]
    reached = next((r["step"] for r in records if r["correct_rate"] >= 0.9), None)
    return {
        "summary": True,
        "estimator": opts.estimator,
        "optimizer": opts.optimizer,
        "lr": opts.lr,
        "max_grad_norm": opts.max_grad_norm,
        "device": opts.device,
        "seed": opts.seed,
        "steps": len(records),
        "samples": opts.samples,
        "first_correct_rate": first["correct_rate"],
        "last_correct_rate": last["correct_rate"],
        "first_hack_rate": first["hack_rate"],
        "last_hack_rate": last["hack_rate"],
        "steps_to_90": reached,
        # One step is 24 answers (about ±0.07 at 0.85): the last ten steps say where the policy settled.
        "last10_correct_mean": sum(r["correct_rate"] for r in records[-10:]) / len(records[-10:]),
        "target_met": first["correct_rate"] <= 0.6 and last["correct_rate"] >= 0.9 and last["hack_rate"] == 0,
        "seconds": round(seconds, 1),
    }


def start_private_stack(stack: LocalStack) -> None:
    """Redis, a gateway and one worker of a stack that only the demo uses."""
    stack.start_redis()
    # The demo is this gateway's only client, and steps answered from the cache are quick: a per-key rate
    # limit would only make it wait.
    stack.start_gateway(KERNELGYM_RATE_LIMIT_PER_MINUTE="1000000")
    stack.start_worker()
    stack.wait_ready(timeout=600)  # a busy machine can take minutes to warm the worker


def run(
    opts: DemoOptions,
    service: str | None,
    emit: Callable[[dict[str, Any]], None],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The whole demo: a private stack (Redis, gateway, one worker) unless `service` is given, priming, training.
    `emit` gets each step's record; returns the summary."""
    import contextlib

    t0 = time.monotonic()
    if opts.device == "cpu":
        torch.set_num_threads(1)  # the worker's evaluations need the other core; oversubscribed threads crawl
    with contextlib.ExitStack() as resources:
        api_key = None  # the private gateway is the demo's alone; another service takes KERNELGYM_API_KEY
        if service is None:
            from kernelgym.stack import LocalStack

            stack = resources.enter_context(LocalStack(device_class="cpu" if opts.device == "cpu" else "gpu"))
            log(f"starting Redis, the gateway and a {stack.device_class} worker (logs in {stack.dir}) ...")
            start_private_stack(stack)
            service = stack.base_url
        else:
            api_key = RLSettings.from_env(url=service).api_key
        client = resources.enter_context(KernelGymClient(service, api_key=api_key, timeout=60))
        scorer = scorer_for(client, opts)
        resources.callback(scorer.close)
        primed = prepare(client, scorer, opts, log)
        records = []
        for record in train(primed, scorer, opts):
            records.append(record)
            emit(record)
    return summary(records, opts, time.monotonic() - t0)
