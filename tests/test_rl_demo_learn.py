"""`kernelgym-rl demo-learn`, short, against the live test service (real Redis, gateway and CPU workers): the
primed policy's correct rate rises and its reward hacks fall within a few training steps."""

from __future__ import annotations

import json

from rl_client.cli import main as rl_main
from rl_client.demo.kernels import CORRECT, HACKS, KINDS
from rl_client.demo.learn import TURN1, turn2_mix


def test_the_priming_mixtures_are_distributions_with_room_to_learn():
    for mix in [TURN1, *(turn2_mix(kind) for kind in KINDS)]:
        assert set(mix) <= set(KINDS) and abs(sum(mix.values()) - 1) < 1e-9
    assert sum(TURN1[k] for k in CORRECT) <= 0.6 and sum(TURN1[k] for k in HACKS) > 0
    assert all(sum(turn2_mix(k)[c] for c in CORRECT) < 0.5 for k in KINDS if k not in CORRECT)


def test_a_short_demo_learn_raises_the_correct_rate(stack, tmp_path, capsys):
    argv = ["demo-learn", "--service", stack.base_url, "--steps", "4", "--json", "--out", str(tmp_path)]
    assert rl_main(argv) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
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
