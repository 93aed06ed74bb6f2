"""HTTP episodes against the live service (real Redis, real HTTP, real CPU workers): reset, idempotent steps,
the trajectory, expiry, and export for SFT / offline RL."""

from __future__ import annotations

import io
import json
import time
import uuid

import httpx
import pyarrow.parquet as pq
import pytest
from helpers import bundled_source, relu_candidate, serving, unique

from rl_client.adapters.episodes import EpisodeStore, create_episode_app
from rl_client.settings import RLSettings

RELU = "level1/1_ReLU"
WRONG = f"```python\n{relu_candidate('return triton_relu(x) * 2.0')}```"


@pytest.fixture
def episodes(stack):
    store = EpisodeStore(stack.redis_url, prefix=f"kge-{uuid.uuid4().hex[:8]}", ttl_s=600)
    app = create_episode_app(store, RLSettings(url=stack.base_url, timeout_s=240))
    with serving(app) as url, httpx.Client(base_url=url, timeout=300) as http:
        yield http, store
    app.state.scorer.close()


def test_an_episode_runs_step_by_step_and_ends_after_max_turns(episodes):
    http, _ = episodes
    reset = http.post("/episodes", json={"problem_id": RELU, "max_turns": 2}).json()
    assert "class Model" in reset["observation"] and reset["problem"] == RELU
    eid = reset["episode_id"]

    first = http.post(f"/episodes/{eid}/step", json={"step": 0, "action": WRONG}).json()
    assert (first["reward"], first["done"], first["info"]["verdict"]) == (0.0, False, "incorrect")
    assert "feedback" in first["observation"].lower()
    good = f"```python\n{unique(bundled_source(RELU))}```"
    second = http.post(f"/episodes/{eid}/step", json={"step": 1, "action": good}).json()
    assert (second["reward"], second["done"], second["observation"]) == (0.5, True, None)

    trajectory = http.get(f"/episodes/{eid}").json()
    assert [t["verdict"] for t in trajectory["turns"]] == ["incorrect", "passed"] and trajectory["done"]
    assert all(t["evaluation_id"] for t in trajectory["turns"])
    ended = http.post(f"/episodes/{eid}/step", json={"step": 2, "action": good})
    assert ended.status_code == 409


def test_a_repeated_step_returns_the_stored_outcome_and_a_skipped_one_is_refused(episodes):
    http, _ = episodes
    eid = http.post("/episodes", json={"problem_id": RELU}).json()["episode_id"]
    assert http.post(f"/episodes/{eid}/step", json={"step": 1, "action": WRONG}).status_code == 409
    first = http.post(f"/episodes/{eid}/step", json={"step": 0, "action": WRONG}).json()
    again = http.post(f"/episodes/{eid}/step", json={"step": 0, "action": "something else entirely"}).json()
    assert again == first
    assert len(http.get(f"/episodes/{eid}").json()["turns"]) == 1


def test_reset_chooses_a_problem_or_takes_a_reference_and_refuses_bad_input(episodes, problems):
    http, _ = episodes
    chosen = http.post("/episodes", json={}).json()
    assert chosen["problem"] in problems.ids()
    inline = http.post("/episodes", json={"reference": problems.load(RELU).source}).json()
    assert inline["problem"] == "reference"
    assert http.post("/episodes", json={"problem_id": "level9/nope"}).status_code == 404
    assert http.post("/episodes", json={"problem_id": RELU, "reference": "x"}).status_code == 422
    assert http.get("/episodes/unknown").status_code == 404


def test_episodes_expire(stack):
    store = EpisodeStore(stack.redis_url, prefix=f"kge-{uuid.uuid4().hex[:8]}", ttl_s=1)
    store.create({"id": "e", "created": time.time(), "turns": []})
    assert store.get("e") is not None
    time.sleep(2.1)
    assert store.get("e") is None


def test_export_has_one_row_per_turn_as_jsonl_and_parquet(episodes):
    http, _ = episodes
    eid = http.post("/episodes", json={"problem_id": RELU, "max_turns": 1}).json()["episode_id"]
    http.post(f"/episodes/{eid}/step", json={"step": 0, "action": WRONG})
    lines = http.get("/episodes/export", params={"format": "jsonl"}).text.splitlines()
    rows = [json.loads(line) for line in lines]
    assert [(r["episode_id"], r["turn"], r["verdict"], r["reward"]) for r in rows] == [(eid, 0, "incorrect", 0.0)]
    assert "class Model" in rows[0]["prompt"] and rows[0]["answer"] == WRONG
    table = pq.read_table(io.BytesIO(http.get("/episodes/export", params={"format": "parquet"}).content))
    assert table.num_rows == 1 and table.column("verdict").to_pylist() == ["incorrect"]
