"""Multi-turn episodes: the model answers, the service scores, its feedback becomes the next prompt. Every
turn is evaluated; an episode runs all its turns (as in Dr. Kernel) unless a `stop` rule ends it after a turn
(`stop_when_fast`: the kernel passed and beat p× eager). The backend only supplies `generate`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rl_client.data import Problem
from rl_client.prompts import next_turn, opening
from rl_client.scoring import ScoreJob, ServiceScorer, TurnOutcome

Messages = list[dict[str, str]]
# A batch of chat histories in, one answer per history out.
Generate = Callable[[list[Messages]], list[str]]
# After a turn: whether the episode ends there.
Stop = Callable[[TurnOutcome], bool]


def stop_when_fast(p: float) -> Stop:
    """End an episode once a turn passes with a measured speedup above `p` (a Fast@p turn)."""

    def stop(outcome: TurnOutcome) -> bool:
        return outcome.correct and outcome.speedup is not None and outcome.speedup > p

    return stop


@dataclass
class Turn:
    prompt: Messages  # the history the answer was generated from
    answer: str
    outcome: TurnOutcome


@dataclass
class Episode:
    problem: Problem
    group: str  # episodes of one prompt share a group (TRLOO's baseline)
    turns: list[Turn] = field(default_factory=list)

    def messages(self, feedback_chars: int) -> Messages:
        msgs: Messages = opening(self.problem.reference)
        for turn in self.turns:
            msgs.append({"role": "assistant", "content": turn.answer})
            msgs.append({"role": "user", "content": next_turn(turn.outcome.feedback, feedback_chars)})
        return msgs


def run_episodes(
    problems: list[Problem],
    samples: int,
    generate: Generate,
    scorer: ServiceScorer,
    max_turns: int = 3,
    feedback_chars: int = 2000,
    stop: Stop | None = None,
) -> list[Episode]:
    """`samples` episodes per problem, up to `max_turns` turns each; generation and scoring are batched per turn."""
    episodes = [Episode(p, group=f"{p.id}") for p in problems for _ in range(samples)]
    return continue_episodes(episodes, generate, scorer, max_turns, feedback_chars, stop)


def continue_episodes(
    episodes: list[Episode],
    generate: Generate,
    scorer: ServiceScorer,
    turns: int,
    feedback_chars: int = 2000,
    stop: Stop | None = None,
) -> list[Episode]:
    """Up to `turns` more turns for each episode, after the turns it already holds. An episode whose new turn
    meets `stop` takes no more; `generate` gets the live episodes' histories, in the episodes' order."""
    live = list(episodes)
    for _ in range(turns):
        if not live:
            break
        histories = [ep.messages(feedback_chars) for ep in live]
        answers = generate(histories)
        if len(answers) != len(live):
            raise ValueError(f"generate returned {len(answers)} answers for {len(live)} histories")
        outcomes = scorer.score(
            [
                ScoreJob(ep.problem.problem_id, ep.problem.inline_reference, a)
                for ep, a in zip(live, answers, strict=True)
            ]
        )
        for ep, history, answer, outcome in zip(live, histories, answers, outcomes, strict=True):
            ep.turns.append(Turn(history, answer, outcome))
        if stop is not None:
            live = [ep for ep in live if not stop(ep.turns[-1].outcome)]
    return episodes
