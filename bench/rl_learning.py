"""TRLOO against GRPO in miniature: `kernelgym-rl demo-learn`'s setting, the same seeds for both estimators.

One private stack (Redis, gateway, one worker) serves every run. For each seed the policy is primed once
(`rl_client.demo.prepare`) and both estimators train a copy of the same primed weights with the same sampling
seed, so a seed's two runs differ only in the advantage estimator. Every episode has two turns; the second sees
the service's feedback on the first.

    python bench/rl_learning.py --seeds 0,1,2 --steps 60 --plot docs/learning.png --out runs/rl_learning.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from gym_client import KernelGymClient
from kernelgym.stack import LocalStack
from rl_client.demo.learn import DemoOptions, prepare, scorer_for, start_private_stack, summary, train

ESTIMATORS = ("trloo", "grpo")
COLOURS = {"trloo": "tab:blue", "grpo": "tab:orange"}


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("correct_rate", "correct (all turns)"),
        ("correct_turn2", "correct, second turn"),
        ("hack_rate", "hacks"),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(13, 3.8))
    for ax, (key, title) in zip(axes, panels, strict=True):
        for estimator in ESTIMATORS:
            curves = [[r[key] for r in run["records"]] for run in runs if run["estimator"] == estimator]
            if not curves:
                continue
            steps = range(1, len(curves[0]) + 1)
            for curve in curves:
                ax.plot(steps, curve, color=COLOURS[estimator], alpha=0.25, linewidth=1)
            mean = torch.tensor(curves, dtype=torch.float64).mean(dim=0).tolist()
            ax.plot(
                steps,
                mean,
                color=COLOURS[estimator],
                linewidth=2.2,
                label=f"{estimator.upper()} (mean of {len(curves)})",
            )
        ax.set_title(title)
        ax.set_xlabel("training step")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].axhline(0.9, color="grey", linestyle=":", linewidth=1)
    axes[0].legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=DemoOptions.steps)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--lr", type=float, default=DemoOptions.lr)
    parser.add_argument("--optimizer", choices=["adamw", "sgd"], default=DemoOptions.optimizer)
    parser.add_argument(
        "--max-grad-norm",
        type=float,
        default=DemoOptions.max_grad_norm,
        help="gradient clipping; a large value turns it off, so that SGD keeps each estimator's scale",
    )
    parser.add_argument("--work", type=Path, default=Path("runs/rl_learning"))
    parser.add_argument("--out", type=Path, help="write every run's records and summary here (JSON)")
    parser.add_argument("--plot", type=Path, help="write the curves here (PNG)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    runs = []
    t0 = time.monotonic()
    with LocalStack(device_class="cpu") as stack:
        start_private_stack(stack)
        with KernelGymClient(stack.base_url, timeout=60) as client:
            for seed in map(int, args.seeds.split(",")):
                base = DemoOptions(
                    seed=seed,
                    steps=args.steps,
                    samples=args.samples,
                    lr=args.lr,
                    optimizer=args.optimizer,
                    max_grad_norm=args.max_grad_norm,
                )
                base.out_dir = str(args.work / f"seed{seed}")
                scorer = scorer_for(client, base)
                primed = prepare(client, scorer, base, lambda m: print(m, file=sys.stderr, flush=True))
                for estimator in ESTIMATORS:
                    opts = replace(base, estimator=estimator)
                    started = time.monotonic()
                    records = []
                    for r in train(primed, scorer, opts):
                        records.append(r)
                        print(
                            f"seed {seed} {estimator} step {r['step']}: correct {r['correct_rate']:.2f}"
                            f" hacks {r['hack_rate']:.2f}",
                            file=sys.stderr,
                            flush=True,
                        )
                    result = summary(records, opts, time.monotonic() - started)
                    runs.append({"seed": seed, "estimator": estimator, "records": records, "summary": result})
                    print(json.dumps(result), flush=True)
                scorer.close()
    report = {"runs": runs, "seconds": round(time.monotonic() - t0), "date": time.strftime("%Y-%m-%d")}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1))
    if args.plot:
        plot(runs, args.plot)
    for estimator in ESTIMATORS:
        mine = [r["summary"] for r in runs if r["estimator"] == estimator]
        print(
            f"{estimator}: steps to 90% correct {[s['steps_to_90'] for s in mine]}, last correct "
            f"{[round(s['last_correct_rate'], 2) for s in mine]}, last hacks {[s['last_hack_rate'] for s in mine]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
