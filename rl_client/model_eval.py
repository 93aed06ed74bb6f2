"""Evaluating a model (any OpenAI-compatible endpoint) over a problem set: N samples × T turns, scored by the
service, reported per turn and best-of-turns as correctness, Fast@p, geometric-mean speedup, coverage and
the share of rejected (hacking) answers.

Fast@p is `rl_client.metrics.fast_p` (KernelBench's definition: correct and speedup over eager PyTorch > p; a
correct sample without a measured speedup, as on a CPU service, is a miss).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from tenacity import retry, stop_after_attempt, wait_exponential

from rl_client.data import Problem
from rl_client.metrics import fast_p
from rl_client.rollout import Episode, Generate, Messages, Turn, continue_episodes, run_episodes
from rl_client.scoring import ServiceScorer, TurnOutcome

FAST_P = (1.0, 1.2, 1.5, 2.0)


def summarize(outcomes: Sequence[TurnOutcome]) -> dict[str, Any]:
    n = len(outcomes)
    correct = [o for o in outcomes if o.correct]
    speedups = [o.speedup for o in correct if o.speedup is not None and o.speedup > 0]
    coverages = [o.coverage for o in correct if o.coverage is not None]
    return {
        "samples": n,
        "correct": len(correct) / n if n else 0.0,
        "fast_p": {str(p): fast_p(((o.correct, o.speedup) for o in outcomes), p) for p in FAST_P},
        "geomean_speedup": math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None,
        "mean_coverage": sum(coverages) / len(coverages) if coverages else None,
        "rejected": sum(1 for o in outcomes if o.verdict == "rejected") / n if n else 0.0,
    }


def best_turn(episode: Episode) -> Turn:
    """The episode's best turn: the correct one with the highest speedup (the first correct one when none has a
    speedup), otherwise the last turn."""
    correct = [t for t in episode.turns if t.outcome.correct]
    if not correct:
        return episode.turns[-1]
    return max(correct, key=lambda t: t.outcome.speedup if t.outcome.speedup is not None else -math.inf)


def best_outcome(episode: Episode) -> TurnOutcome:
    return best_turn(episode).outcome


def sequential_scaling(
    problems: list[Problem],
    samples: int,
    generate: Generate,
    scorer: ServiceScorer,
    turns: int,
    iterations: int,
    feedback_chars: int = 2000,
) -> list[list[Episode]]:
    """Sequential test-time scaling: `iterations` windows of `turns` turns per sample. The first window is a
    plain episode; each later one starts a fresh context holding only the best turn so far (its answer and
    the feedback on it), so the context stays short however many turns are spent. One list of episodes per
    window; a later window's first turn is that carried-over best turn."""
    windows = [run_episodes(problems, samples, generate, scorer, turns, feedback_chars)]
    for _ in range(iterations - 1):
        seeds = [Episode(e.problem, e.group, turns=[best_turn(e)]) for e in windows[-1]]
        windows.append(continue_episodes(seeds, generate, scorer, turns, feedback_chars))
    return windows


def report(windows: Sequence[Sequence[Episode]]) -> dict[str, Any]:
    """Per turn of the first window, best of its turns, and with several windows the best so far after each."""
    episodes = windows[0]
    turns = max((len(e.turns) for e in episodes), default=0)
    rep: dict[str, Any] = {
        "per_turn": [summarize([e.turns[t].outcome for e in episodes if len(e.turns) > t]) for t in range(turns)],
        "best_of_turns": summarize([best_outcome(e) for e in episodes if e.turns]),
    }
    if len(windows) > 1:  # a later window starts from the best turn so far, so its best is the best so far
        rep["per_iteration"] = [summarize([best_outcome(e) for e in w if e.turns]) for w in windows]
    return rep


def table(rep: dict[str, Any]) -> str:
    head = ["", "correct"] + [f"fast_{p}" for p in FAST_P] + ["geomean speedup", "coverage", "rejected"]
    rows = [(f"turn {i + 1}", s) for i, s in enumerate(rep["per_turn"])] + [("best of turns", rep["best_of_turns"])]
    rows += [(f"best after iteration {i + 1}", s) for i, s in enumerate(rep.get("per_iteration", []))]

    def fmt(x: float | None, pct: bool = True) -> str:
        return "-" if x is None else (f"{x:.1%}" if pct else f"{x:.3f}")

    lines = [" | ".join(head)]
    for name, s in rows:
        cells = [name, fmt(s["correct"])] + [fmt(s["fast_p"][str(p)]) for p in FAST_P]
        cells += [fmt(s["geomean_speedup"], pct=False), fmt(s["mean_coverage"]), fmt(s["rejected"])]
        lines.append(" | ".join(cells))
    return "\n".join(lines)


class OpenAIGenerator:
    """`generate(histories) -> answers` through an OpenAI-compatible `/chat/completions` (vLLM's server,
    hosted APIs). A request that still fails after retries yields an empty answer, which scores 0."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        temperature: float = 1.0,
        max_tokens: int = 8192,
        concurrency: int = 16,
        timeout_s: float = 600.0,
        top_p: float = 1.0,
    ):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)
        self.body = {"model": model, "temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="kg-generate")
        self.failures = 0

    @retry(stop=stop_after_attempt(4), wait=wait_exponential(multiplier=1, max=20), reraise=True)
    def _complete(self, messages: Messages) -> str:
        r = self.http.post("/chat/completions", json={**self.body, "messages": messages})
        r.raise_for_status()
        return r.json()["choices"][0]["message"]["content"] or ""

    def _one(self, messages: Messages) -> str:
        try:
            return self._complete(messages)
        except (httpx.HTTPError, KeyError, IndexError, ValueError):
            self.failures += 1
            return ""

    def __call__(self, histories: list[Messages]) -> list[str]:
        return list(self.pool.map(self._one, histories))

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.http.close()


def plot(rep: dict[str, Any], path: str) -> None:
    """Correct share and Fast@p per turn, with best-of-turns as the last group; written as an image."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [(f"turn {i + 1}", s) for i, s in enumerate(rep["per_turn"])] + [("best", rep["best_of_turns"])]
    series = [("correct", lambda s: s["correct"])] + [(f"fast_{p}", lambda s, p=p: s["fast_p"][str(p)]) for p in FAST_P]
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(1.6 * len(groups) + 2, 3.5))
    for k, (name, value) in enumerate(series):
        ax.bar([g + k * width for g in range(len(groups))], [value(s) for _, s in groups], width, label=name)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))], [name for name, _ in groups])
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of samples")
    ax.set_title(f"{rep.get('model', '')} ({rep.get('gpu', '')}, {rep.get('protocol_version', '')})")
    ax.legend(fontsize=8, ncol=len(series))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
