"""Multi-turn episodes over HTTP, for any agent or framework (gym / OpenEnv style):

    POST /episodes                      reset: choose or pass a problem; the first observation
    POST /episodes/{id}/step            {"step": n, "action": answer} -> observation, reward, done, info
    GET  /episodes/{id}                 the whole trajectory, with every evaluation
    GET  /episodes/export?format=jsonl|parquet   every stored episode, one row per turn (SFT, offline RL)

Episodes live in Redis under their own prefix and expire `ttl_s` after their last step. A step is
idempotent per index: repeating step n returns the stored outcome of step n (a retry after a lost answer
costs nothing), step n+1 before n is a 409. Observations are the same prompts our own rollout uses
(`rl_client.prompts`), and rewards follow the reward spec (default `drkernel-pr/v1`).
"""

from __future__ import annotations

import asyncio
import io
import json
import random
import time
import uuid
from typing import Any, Literal

import redis
from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field, model_validator

from gym_client import KernelGymError
from rl_client.adapters.common import outcome_dict
from rl_client.algorithms.rewards import DRKERNEL_PR, RewardSpec
from rl_client.prompts import SYSTEM, first_turn, next_turn
from rl_client.scoring import ScoreJob
from rl_client.settings import RLSettings


class ResetRequest(BaseModel):
    problem_id: str | None = Field(None, description="A problem of the service's set; random when neither is given.")
    reference: str | None = Field(None, description="A KernelBench reference source defining `class Model`.")
    max_turns: int = Field(3, ge=1, le=50)
    feedback_chars: int = Field(2000, ge=100, le=100_000)

    @model_validator(mode="after")
    def one_problem(self) -> ResetRequest:
        if self.problem_id is not None and self.reference is not None:
            raise ValueError("give problem_id or reference, not both")
        return self


class StepRequest(BaseModel):
    step: int = Field(ge=0, description="Index of this step (0 for the first answer); makes retries idempotent.")
    action: str = Field(max_length=512 * 1024, description="The model's answer, prose and code.")


class EpisodeStore:
    """Episodes as JSON documents in Redis; writes use optimistic transactions, so two concurrent copies of a
    step cannot both append."""

    def __init__(self, url: str, prefix: str = "kge", ttl_s: int = 86_400):
        self.r = redis.Redis.from_url(url)
        self.prefix, self.ttl_s = prefix, ttl_s

    def key(self, episode_id: str) -> str:
        return f"{self.prefix}:episode:{episode_id}"

    def create(self, episode: dict[str, Any]) -> None:
        self.r.set(self.key(episode["id"]), json.dumps(episode), ex=self.ttl_s)

    def get(self, episode_id: str) -> dict[str, Any] | None:
        raw = self.r.get(self.key(episode_id))
        return json.loads(raw) if raw is not None else None

    def append_turn(self, episode_id: str, step: int, turn: dict[str, Any]) -> dict[str, Any]:
        """Append `turn` as step `step` unless that step exists already; returns the episode as stored."""
        key = self.key(episode_id)
        with self.r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(key)
                    raw = pipe.get(key)
                    if raw is None:
                        raise KeyError(episode_id)
                    episode = json.loads(raw)
                    if len(episode["turns"]) > step:
                        return episode  # another copy of this step got there first
                    episode["turns"].append(turn)
                    episode["done"] = len(episode["turns"]) >= episode["max_turns"]
                    pipe.multi()
                    pipe.set(key, json.dumps(episode), ex=self.ttl_s)
                    pipe.execute()
                    return episode
                except redis.WatchError:
                    continue

    def all(self) -> list[dict[str, Any]]:
        episodes = []
        for key in self.r.scan_iter(match=f"{self.prefix}:episode:*", count=500):
            raw = self.r.get(key)
            if raw is not None:
                episodes.append(json.loads(raw))
        return sorted(episodes, key=lambda e: e["created"])


def step_view(episode: dict[str, Any], n: int) -> dict[str, Any]:
    turn = episode["turns"][n]
    done = n + 1 >= episode["max_turns"]
    return {
        "episode_id": episode["id"],
        "step": n,
        "observation": None if done else next_turn(turn["feedback"], episode["feedback_chars"]),
        "reward": turn["score"],
        "done": done,
        "info": {k: v for k, v in turn.items() if k not in ("action", "score")},
    }


def export_rows(episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per turn, with the prompt the answer was given to, ready for SFT or offline RL."""
    rows = []
    for ep in episodes:
        for n, turn in enumerate(ep["turns"]):
            prompt = (
                first_turn(ep["reference"])
                if n == 0
                else next_turn(ep["turns"][n - 1]["feedback"], ep["feedback_chars"])
            )
            rows.append(
                {
                    "episode_id": ep["id"],
                    "problem": ep["problem"],
                    "turn": n,
                    "prompt": prompt,
                    "answer": turn["action"],
                    "reward": turn["score"],
                    "verdict": turn["verdict"],
                    "correct": turn["correct"],
                    "speedup": turn["speedup"],
                    "coverage": turn["coverage"],
                    "correct_reward": turn["correct_reward"],
                    "speedup_reward": turn["speedup_reward"],
                    "coverage_reward": turn["coverage_reward"],
                    "reward_spec": turn["reward_spec"],
                    "feedback": turn["feedback"],
                    "evaluation_id": turn["evaluation_id"],
                }
            )
    return rows


def create_episode_app(
    store: EpisodeStore, config: RLSettings | None = None, spec: RewardSpec = DRKERNEL_PR
) -> FastAPI:
    config = config or RLSettings.from_env()
    scorer = config.scorer(spec)
    app = FastAPI(title="KernelGym episodes", version=spec.id)

    @app.post("/episodes")
    async def reset(body: ResetRequest) -> dict[str, Any]:
        problem_id, reference = body.problem_id, body.reference
        try:
            if reference is None:
                if problem_id is None:
                    problem_id = random.choice(await asyncio.to_thread(scorer.client.problems))
                reference = await asyncio.to_thread(scorer.client.problem, problem_id)
        except KernelGymError as exc:
            raise HTTPException(status_code=404 if exc.status_code == 404 else 502, detail=str(exc)) from None
        episode = {
            "id": uuid.uuid4().hex,
            "created": time.time(),
            "problem": problem_id or "reference",
            "problem_id": problem_id,
            "reference": reference,
            "max_turns": body.max_turns,
            "feedback_chars": body.feedback_chars,
            "reward_spec": spec.id,
            "turns": [],
            "done": False,
        }
        store.create(episode)
        return {
            "episode_id": episode["id"],
            "problem": episode["problem"],
            "max_turns": body.max_turns,
            "system": SYSTEM,
            "observation": first_turn(reference),
        }

    # Registered before /episodes/{episode_id} so that "export" is not taken for an id.
    @app.get("/episodes/export")
    async def export(fmt: Literal["jsonl", "parquet"] = Query("jsonl", alias="format")) -> Response:
        rows = export_rows(await asyncio.to_thread(store.all))
        if fmt == "jsonl":
            text = "".join(json.dumps(row) + "\n" for row in rows)
            return Response(text, media_type="application/x-ndjson")
        import pyarrow as pa
        import pyarrow.parquet as pq

        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows), buf)
        return Response(buf.getvalue(), media_type="application/vnd.apache.parquet")

    @app.get("/episodes/{episode_id}")
    async def trajectory(episode_id: str) -> dict[str, Any]:
        episode = store.get(episode_id)
        if episode is None:
            raise HTTPException(status_code=404, detail=f"no episode {episode_id} (unknown or expired)")
        return episode

    @app.post("/episodes/{episode_id}/step")
    async def step(episode_id: str, body: StepRequest) -> dict[str, Any]:
        episode = store.get(episode_id)
        if episode is None:
            raise HTTPException(status_code=404, detail=f"no episode {episode_id} (unknown or expired)")
        done = len(episode["turns"])
        if body.step < done:
            return step_view(episode, body.step)
        if body.step > done:
            raise HTTPException(status_code=409, detail=f"step {body.step} before step {done}; send step {done}")
        if body.step >= episode["max_turns"]:
            raise HTTPException(status_code=409, detail=f"the episode ended after {episode['max_turns']} steps")
        job = ScoreJob(episode["problem_id"], None if episode["problem_id"] else episode["reference"], body.action)
        [outcome] = await asyncio.to_thread(scorer.score, [job])
        turn = {"action": body.action, **outcome_dict(outcome)}
        try:
            episode = store.append_turn(episode_id, body.step, turn)
        except KeyError:
            raise HTTPException(status_code=404, detail=f"episode {episode_id} expired during the step") from None
        return step_view(episode, body.step)

    app.state.scorer = scorer
    return app


def serve(redis_url: str, host: str = "127.0.0.1", port: int = 8200, ttl_s: int = 86_400) -> None:
    import uvicorn

    uvicorn.run(create_episode_app(EpisodeStore(redis_url, ttl_s=ttl_s)), host=host, port=port, log_level="info")
