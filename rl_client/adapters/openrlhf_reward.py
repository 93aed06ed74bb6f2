"""OpenRLHF's remote reward, served as-is: `--reward.remote_url http://HOST:PORT/get_reward`.

OpenRLHF posts one sample at a time, `{"query": [prompt + response], "prompts": [prompt], "labels": [label]}`,
and expects `{"rewards": [...], "scores": [...], "extra_logs": {...}}`. It gives up on a request after 180 s
and tries 5 times. A kernel evaluation can take longer when the queue is deep, so this server answers within
`answer_within_s` (default 170 s): with the rewards when the evaluations finished, otherwise with 504 while the
evaluations go on running. OpenRLHF's retry sends the identical sample again, which the service's result cache
attaches to the evaluation already running, so no work is repeated and the retry gets the result as soon as
it exists. Keep `answer_within_s` × 5 above the longest expected wait, or use the agent path (rl_client/
openrlhf_agent.py), which has no such limit. An answer the service failed to judge (refused, failed) is answered
with 503, never with a reward of 0: OpenRLHF's client tries again, and after its last try scores nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field, model_validator

from rl_client.adapters.common import LabelError, job_from_label, outcome_metrics
from rl_client.algorithms.rewards import DRKERNEL_PR, RewardSpec
from rl_client.settings import RLSettings


class RewardRequest(BaseModel):
    query: list[str] = Field(min_length=1)
    prompts: list[str] = Field(min_length=1)
    labels: list[Any] = Field(min_length=1)

    @model_validator(mode="after")
    def same_lengths(self) -> RewardRequest:
        if not len(self.query) == len(self.prompts) == len(self.labels):
            raise ValueError(
                f"query, prompts and labels must have one entry per sample "
                f"(got {len(self.query)}, {len(self.prompts)}, {len(self.labels)})"
            )
        return self


def response_text(query: str, prompt: str) -> str:
    """OpenRLHF sends the prompt and the response decoded together; the answer is what follows the prompt."""
    return query[len(prompt) :] if prompt and query.startswith(prompt) else query


def create_app(
    config: RLSettings | None = None, spec: RewardSpec = DRKERNEL_PR, answer_within_s: float | None = None
) -> FastAPI:
    """`answer_within_s` defaults to the settings' (KERNELGYM_REWARD_ANSWER_WITHIN_S)."""
    config = config or RLSettings.from_env()
    scorer = config.scorer(spec, timeout_s=answer_within_s or config.answer_within_s, cancel_late=False)
    app = FastAPI(title="KernelGym reward for OpenRLHF", version=spec.id)

    @app.post("/get_reward")
    async def get_reward(body: RewardRequest) -> dict[str, Any]:
        try:
            jobs = [
                job_from_label(label, response_text(q, p))
                for q, p, label in zip(body.query, body.prompts, body.labels, strict=True)
            ]
        except LabelError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None
        outcomes = await asyncio.to_thread(scorer.score, jobs)
        pending = [o.evaluation_id for o in outcomes if o.pending]
        if pending:
            raise HTTPException(
                status_code=504,
                detail=f"{len(pending)} evaluation(s) still running ({', '.join(map(str, pending))}); "
                "send the same request again to get their result",
            )
        faults = [o.feedback for o in outcomes if o.service_fault]
        if faults:  # never a 0 to train on: OpenRLHF's client tries again, and gives up rather than score it
            raise HTTPException(
                status_code=503,
                detail=f"the service failed to judge {len(faults)} answer(s): {faults[0]}",
                headers={"Retry-After": "1"},
            )
        rewards = [o.reward.reward for o in outcomes]
        metrics = [outcome_metrics(o) for o in outcomes]
        return {
            "rewards": rewards,
            "scores": rewards,
            "extra_logs": {k: [m[k] for m in metrics] for k in ("correct", "rejected", "speedup", "coverage")},
        }

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "reward_spec": spec.id, "service": config.url}

    app.state.scorer = scorer
    return app


def serve(host: str = "127.0.0.1", port: int = 8100, answer_within_s: float | None = None) -> None:
    import uvicorn

    uvicorn.run(create_app(answer_within_s=answer_within_s), host=host, port=port, log_level="info")
