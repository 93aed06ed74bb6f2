"""`kernelgym-rl demo-learn`, short, as a user runs it (its own real Redis, gateway and CPU worker): the primed
policy's correct rate rises and its reward hacks fall within a few training steps, and nothing it started outlives
it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from rl_client.demo.kernels import CORRECT, HACKS, KINDS
from rl_client.demo.learn import TURN1, turn2_mix


def test_the_priming_mixtures_are_distributions_with_room_to_learn():
    for mix in [TURN1, *(turn2_mix(kind) for kind in KINDS)]:
        assert set(mix) <= set(KINDS) and abs(sum(mix.values()) - 1) < 1e-9
    assert sum(TURN1[k] for k in CORRECT) <= 0.6 and sum(TURN1[k] for k in HACKS) > 0
    assert all(sum(turn2_mix(k)[c] for c in CORRECT) < 0.5 for k in KINDS if k not in CORRECT)


def processes_tagged(tag: str) -> list[int]:
    """Processes whose environment holds `tag` (inherited from the demo by everything it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and tag.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def test_a_short_demo_learn_on_its_private_stack_raises_the_correct_rate_and_leaves_nothing_running(tmp_path):
    """As a user runs it: its own Redis, gateway and CPU worker, started and stopped by the command."""
    tag = f"demo-learn-test-{uuid.uuid4().hex}"
    argv = [sys.executable, "-m", "rl_client.cli", "demo-learn", "--steps", "4", "--json", "--out", str(tmp_path)]
    env = {**os.environ, "DEMO_LEARN_TEST_TAG": tag}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "starting Redis, the gateway and a cpu worker" in done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    steps, summary = lines[:-1], lines[-1]
    assert [s["step"] for s in steps] == [1, 2, 3, 4] and summary["summary"] is True
    assert summary["first_correct_rate"] == steps[0]["correct_rate"] <= 0.6
    assert summary["last_correct_rate"] == steps[-1]["correct_rate"]
    first, late = steps[0], steps[-2:]
    assert min(s["correct_rate"] for s in late) > first["correct_rate"], [s["correct_rate"] for s in steps]
    assert max(s["hack_rate"] for s in late) < first["hack_rate"], [s["hack_rate"] for s in steps]
    assert all(s["service_faults"] == 0 for s in steps)  # every answer was judged by the service
    assert summary["last10_correct_mean"] == sum(s["correct_rate"] for s in steps) / 4
    assert (tmp_path / "primed" / "config.json").exists()
    assert processes_tagged(tag) == []  # Redis, the gateway, the worker and its children all stopped
