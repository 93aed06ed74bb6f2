"""GRPO's self-inclusion bias against TRLOO, by Monte Carlo (`rl_client.analysis.expected_gradient`).

    python bench/rl_bias.py --out docs/rl_bias.png

Prints, for each group size N and for a shrinking multi-turn schedule, the expected gradient of each estimator
relative to the true gradient, and plots it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from rl_client.algorithms import grpo_advantages, trloo_advantages
from rl_client.analysis import expected_gradient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/rl_bias.png"))
    parser.add_argument("--groups", type=int, default=50_000)
    args = parser.parse_args()

    sizes = [2, 3, 4, 6, 8, 12, 16]
    # Each size is one "turn" here: the simulation handles a different group size per turn at once.
    grpo = expected_gradient(grpo_advantages, sorted(sizes, reverse=True), args.groups)[::-1]
    trloo = expected_gradient(trloo_advantages, sorted(sizes, reverse=True), args.groups)[::-1]
    print("N    GRPO    (N-1)/N   TRLOO")
    for n, g, t in zip(sizes, grpo, trloo, strict=True):
        print(f"{n:<4} {g:6.3f}  {(n - 1) / n:6.3f}    {t:6.3f}")
    schedule = [16, 14, 13]  # 16 rollouts, ~10% ending after each of the first two turns
    g3 = expected_gradient(grpo_advantages, schedule, args.groups)
    t3 = expected_gradient(trloo_advantages, schedule, args.groups)
    print("multi-turn schedule", schedule, "GRPO", [round(x, 3) for x in g3], "TRLOO", [round(x, 3) for x in t3])

    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(sizes, [(n - 1) / n for n in sizes], "k:", label="(N−1)/N")
    ax.plot(sizes, grpo, "o-", label="GRPO (group mean incl. self)")
    ax.plot(sizes, trloo, "s-", label="TRLOO (leave-one-out)")
    ax.axhline(1.0, color="grey", lw=0.5)
    ax.set_xlabel("group size N at a turn")
    ax.set_ylabel("expected gradient / true gradient")
    ax.set_ylim(0.4, 1.1)
    ax.legend(loc="lower right")
    ax.set_title(f"Monte Carlo, {args.groups} groups per point")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
