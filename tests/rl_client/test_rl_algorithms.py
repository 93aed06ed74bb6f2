"""The RL formulas against hand-computed values, and the self-inclusion bias by Monte Carlo."""

from __future__ import annotations

import math

import pytest
import torch

from rl_client.algorithms import (
    DRKERNEL_PR,
    RewardSpec,
    failure_after_success_mask,
    grpo_advantages,
    judged_mask,
    mismatch_rejection,
    prs_keep,
    trloo_advantages,
    turn_returns,
    turn_reward,
)
from rl_client.analysis import expected_gradient

T, F = True, False


def test_turn_returns_sum_the_remaining_unmasked_turns():
    r = torch.tensor([[1.0, 2.0, 3.0]])
    assert turn_returns(r, torch.tensor([[T, T, T]])).tolist() == [[6.0, 5.0, 3.0]]
    assert turn_returns(r, torch.tensor([[T, T, T]]), gamma=0.5).tolist() == [[2.75, 3.5, 3.0]]
    assert turn_returns(r, torch.tensor([[T, F, T]])).tolist() == [[4.0, 0.0, 3.0]]


def test_trloo_and_grpo_on_the_worked_example():
    """One prompt, one turn, N = 4, returns [2, 1, 0, 1]: TRLOO is 4/3 of GRPO's mean-centring."""
    r = torch.tensor([[2.0], [1.0], [0.0], [1.0]])
    mask = torch.ones(4, 1, dtype=torch.bool)
    trloo = trloo_advantages(r, mask, ["p"] * 4).flatten().tolist()
    assert trloo == pytest.approx([4 / 3, 0.0, -4 / 3, 0.0])
    assert grpo_advantages(r, mask, ["p"] * 4).flatten().tolist() == pytest.approx([1.0, 0.0, -1.0, 0.0])


def test_trloo_uses_only_peers_valid_at_each_turn():
    r = torch.tensor([[1.0, 1.0], [0.0, 2.0], [1.0, 0.0]])
    mask = torch.tensor([[T, T], [T, F], [T, T]])
    # Returns: [2, 1], [0, 0] (its turn 2 is masked), [1, 0].
    adv = trloo_advantages(r, mask, ["p", "p", "p"])
    assert adv.flatten().tolist() == pytest.approx([1.5, 1.0, -1.5, 0.0, 0.0, -1.0])


def test_trloo_alone_in_its_group_keeps_its_return_and_groups_do_not_mix():
    r = torch.tensor([[1.0, 2.0], [5.0, 0.0], [3.0, 0.0]])
    mask = torch.ones(3, 2, dtype=torch.bool)
    adv = trloo_advantages(r, mask, ["a", "b", "b"])
    assert adv.flatten().tolist() == pytest.approx([3.0, 2.0, 2.0, 0.0, -2.0, 0.0])


def test_grpo_std_normalisation_and_a_singleton_group():
    r = torch.tensor([[2.0], [0.0], [7.0]])
    adv = grpo_advantages(r, torch.ones(3, 1, dtype=torch.bool), ["p", "p", "q"], std_normalize=True)
    assert adv.flatten().tolist() == pytest.approx([1 / (1 + 1e-6), -1 / (1 + 1e-6), 0.0])


def test_shapes_and_types_are_checked():
    with pytest.raises(ValueError, match="group_ids"):
        trloo_advantages(torch.zeros(2, 1), torch.ones(2, 1, dtype=torch.bool), ["p"])
    with pytest.raises(TypeError, match="bool"):
        trloo_advantages(torch.zeros(2, 1), torch.ones(2, 1), ["p", "p"])


def test_failure_after_success_leaves_the_loss():
    r = torch.tensor([[0.0, 1.0, 0.0, 0.5], [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[T, T, T, T], [T, T, T, T], [T, T, F, T]])
    assert failure_after_success_mask(r, mask).tolist() == [[T, T, F, T], [T, T, T, T], [T, F, F, F]]


def test_a_trajectory_with_an_unjudged_turn_leaves_the_loss_and_the_baselines():
    fault = torch.tensor([[F, F], [F, T], [T, F]])
    assert judged_mask(fault).tolist() == [[T, T], [F, F], [F, F]]
    # Its zero reward would otherwise lower the others' baseline: here the judged member is alone in its group.
    adv = trloo_advantages(torch.tensor([[0.5, 0.5], [0.0, 0.0], [0.0, 0.0]]), judged_mask(fault), ["p"] * 3)
    assert adv.tolist() == [[1.0, 0.5], [0.0, 0.0], [0.0, 0.0]]


def test_mismatch_rejection_band_and_token_veto():
    # Trajectory 0 drifts by 0.05% per token (kept), 1 by 1% (rejected), 2 averages to 0 but one of its turn-0
    # tokens has ratio e^-10 < 1e-4 (turn 0 vetoed, turn 1 kept). Column 0 is a prompt token (turn id -1).
    turn_ids = torch.tensor([[-1, 0, 0, 1, 1]] * 3)
    drift = torch.tensor(
        [[0.0, 5e-4, 5e-4, 5e-4, 5e-4], [0.0, 1e-2, 1e-2, 1e-2, 1e-2], [9.0, -10.0, 10.0, 0.0, 0.0]],
        dtype=torch.float64,
    )
    rollout = torch.full((3, 5), -1.0, dtype=torch.float64)
    result = mismatch_rejection(rollout + drift, rollout, turn_ids)
    assert result.kept.tolist() == [T, F, T]
    assert result.ratio.tolist() == pytest.approx([math.exp(5e-4), math.exp(1e-2), 1.0])
    assert result.vetoed_turns.tolist() == [[F, F], [F, F], [T, F]]
    assert result.keep_tokens.tolist() == [[F, T, T, T, T], [F, F, F, F, F], [F, F, F, T, T]]


def test_reward_spec_drkernel_pr():
    assert DRKERNEL_PR.id == "drkernel-pr/v1"
    assert turn_reward(DRKERNEL_PR, "passed", 2.0, 0.8).reward == pytest.approx(0.5 + 1.0 + 0.4)
    assert turn_reward(DRKERNEL_PR, "passed", 5.0, 1.0).reward == pytest.approx(0.5 + 1.5 + 0.5)
    assert turn_reward(DRKERNEL_PR, "passed", None, None).reward == 0.5  # CPU: no speedup, no coverage
    for verdict in ("rejected", "incorrect", "crashed", None):
        assert turn_reward(DRKERNEL_PR, verdict, 9.0, 1.0).reward == 0.0
    custom = RewardSpec(name="speed-only", version=2, correct_weight=0.0, coverage_weight=0.0, speedup_cap=10)
    assert turn_reward(custom, "passed", 5.0, 0.9).as_dict() == {
        "reward": 2.5,
        "correct": 0.0,
        "speedup": 2.5,
        "coverage": 0.0,
        "spec": "speed-only/v2",
    }


def test_prs_keeps_by_coverage_only_for_correct_turns():
    n = 20_000
    correct = torch.tensor([[T, T, T, F, T]]).repeat(n, 1)
    coverage = torch.tensor([[0.2, 0.45, 0.35, 0.0, float("nan")]]).repeat(n, 1)
    keep = prs_keep(correct, coverage, generator=torch.Generator().manual_seed(0)).double().mean(dim=0)
    assert keep[0] == 0.0 and keep[1] == 1.0 and keep[3] == 1.0 and keep[4] == 1.0
    assert keep[2].item() == pytest.approx(0.5, abs=0.02)


def test_grpo_is_biased_by_self_inclusion_and_trloo_is_not():
    """GRPO's expected gradient is (N−1)/N of the true one, N varying by turn; TRLOO's is the true one."""
    sizes = [8, 4, 2]
    trloo = expected_gradient(trloo_advantages, sizes)
    grpo = expected_gradient(grpo_advantages, sizes)
    for t, n in enumerate(sizes):
        assert trloo[t] == pytest.approx(1.0, rel=0.03)
        assert grpo[t] == pytest.approx((n - 1) / n, rel=0.03)
