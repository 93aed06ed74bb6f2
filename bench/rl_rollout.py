"""Rollout throughput of the RL client's local backend against the live service, and where the time goes.

    python bench/rl_rollout.py --device-class h100 --gpu 0            # policy and worker on GPU 0
    python bench/rl_rollout.py --device-class cpu --samples 2 --turns 1  # the same path on CPU (interpreter)

Starts Redis, a gateway and one worker (`kernelgym.stack.LocalStack`), then runs `--steps` training steps of
`rl_client.local.trainer.LocalTrainer` (multi-turn rollout, TRLOO, PRS, MRS, one PPO update) with the policy on the
same GPU as the worker. The policy is the tests' 2-layer character-level GPT-2, primed to answer the ReLU
problem with a right or a wrong Triton kernel, so every turn is a real evaluation with a real verdict. A
real LLM's answers are all different; this one has two, so each answer gets a unique trailing comment and
the service's result cache never answers (every evaluation runs on the worker).

The policy was primed on the first-turn prompt only: its later turns rarely hold code, score 0 without an
evaluation, and are counted apart (`turns` vs `evaluations`); `--turns 1` makes every turn an evaluation.

Prints one JSON line per step (episodes, evaluations, generate/score/update seconds, rewards) and a summary:
episodes per minute of rollout (generation + scoring) and per minute of whole steps, and the share of a
step spent generating, waiting for evaluations and updating. Generation time is that of the tiny model:
it shows the client's own overhead, not a production model's decoding time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "rl_client")]

import torch  # noqa: E402
from test_rl_local_train import RELU, prime, tiny_model  # noqa: E402

from gym_client import KernelGymClient  # noqa: E402
from kernelgym.stack import LocalStack  # noqa: E402
from rl_client.algorithms import RewardSpec  # noqa: E402
from rl_client.config import TrainConfig  # noqa: E402
from rl_client.data import service_problems  # noqa: E402
from rl_client.local.policy import LocalPolicy  # noqa: E402
from rl_client.local.trainer import LocalTrainer  # noqa: E402
from rl_client.scoring import ServiceScorer  # noqa: E402


class CountingScorer(ServiceScorer):
    """Counts the answers the service actually evaluated (an answer without code never reaches it)."""

    evaluated = 0

    def score(self, jobs):
        outcomes = super().score(jobs)
        self.evaluated += sum(o.verdict is not None for o in outcomes)
        return outcomes


class DistinctAnswers(LocalPolicy):
    """The primed policy, with a unique comment after each answer's code block (see the module docstring)."""

    def generate(self, histories):
        answers, samples = super().generate(histories)
        return [self._distinct(a) for a in answers], samples

    @staticmethod
    def _distinct(answer: str) -> str:
        if answer.count("```") < 2:
            return answer
        head, tail = answer.rsplit("```", 1)
        return f"{head}# sample {uuid.uuid4().hex}\n```{tail}"


def run(args: argparse.Namespace) -> list[dict]:
    device = "cpu" if args.device_class == "cpu" else f"cuda:{args.gpu}"
    with tempfile.TemporaryDirectory() as tmp, LocalStack(Path(tmp), device_class=args.device_class) as stack:
        stack.start_redis()
        stack.start_gateway()
        stack.start_worker(gpu=None if args.device_class == "cpu" else args.gpu)
        stack.wait_ready(workers=1, timeout=180)
        with KernelGymClient(stack.base_url, timeout=60) as client:
            problem = service_problems(client, [RELU])[0]
            torch.manual_seed(0)
            model, tokenizer = tiny_model()
            model.to(device)
            t0 = time.monotonic()
            prime(model, tokenizer, problem.reference)
            prime_s = time.monotonic() - t0
            cfg = TrainConfig(
                model="(primed in process)",
                device=device,
                prompts_per_step=args.prompts,
                samples_per_prompt=args.samples,
                max_turns=args.turns,
                max_new_tokens=600,
                lr=1e-3,
                loss_scale=1.0,
            )
            policy = DistinctAnswers(model, tokenizer, device, cfg.temperature, cfg.top_p, 600)
            scorer = CountingScorer(client, RewardSpec(), device_class=args.device_class, timeout_s=1800)
            optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
            trainer = LocalTrainer(cfg, policy, scorer, optimizer)
            rows = []
            try:
                for step in range(1, args.steps + 1):
                    t0 = time.monotonic()
                    before = scorer.evaluated
                    m = trainer.step([problem] * args.prompts)
                    wall = time.monotonic() - t0
                    episodes = args.prompts * args.samples
                    row = {
                        "step": step,
                        "episodes": episodes,
                        "turns": episodes * args.turns,
                        "evaluations": scorer.evaluated - before,
                        "wall_s": round(wall, 2),
                        **{k: round(m[k], 2) for k in ("time/generate_s", "time/score_s", "time/update_s")},
                        **{f"reward/turn{t}": round(m[f"reward/turn{t}"], 3) for t in range(1, args.turns + 1)},
                        "prime_s": round(prime_s, 1),
                    }
                    print(json.dumps(row), flush=True)
                    rows.append(row)
            finally:
                scorer.close()
    return rows


def summary(rows: list[dict]) -> dict:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    episodes = rows[0]["episodes"]
    rollout = med("time/generate_s") + med("time/score_s")
    return {
        "steps": len(rows),
        "episodes_per_step": episodes,
        "evaluations_per_step": med("evaluations"),
        "episodes_per_min_rollout": round(60 * episodes / rollout, 2),
        "episodes_per_min_step": round(60 * episodes / med("wall_s"), 2),
        "evaluations_per_min_scoring": round(60 * med("evaluations") / med("time/score_s"), 2),
        "share_generate": round(med("time/generate_s") / med("wall_s"), 3),
        "share_score": round(med("time/score_s") / med("wall_s"), 3),
        "share_update": round(med("time/update_s") / med("wall_s"), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device-class", default="h100", help="the worker's device class; `cpu` for the interpreter")
    parser.add_argument("--gpu", type=int, default=0, help="GPU of the worker and the policy")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per step (all the ReLU problem)")
    parser.add_argument("--samples", type=int, default=8, help="samples per prompt")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the rows and the summary here")
    args = parser.parse_args()
    rows = run(args)
    result = summary(rows)
    print(json.dumps(result), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": result}, indent=2))


if __name__ == "__main__":
    main()
