"""Turn-level advantages spread onto a multi-turn token sequence (OpenRLHF's layout)."""

from __future__ import annotations

import pytest
import torch

from rl_client.turn_tokens import token_advantages, turn_ids, turn_spans

T, F = True, False


def test_turn_spans_are_the_runs_of_the_action_mask():
    mask = torch.tensor([[F, T, T, F, F, T, F], [T, F, T, T, T, F, F]])
    assert turn_spans(mask) == [[(1, 3), (5, 6)], [(0, 1), (2, 5)]]


def test_each_turns_advantage_lands_on_its_answer_tokens():
    # Two trajectories of one prompt; turn rewards [0.5, 0] and [0, 1.0]; returns [0.5, 0] and [1.0, 1.0].
    mask = torch.tensor([[F, T, T, F, T, F], [F, T, F, F, T, T]])
    rewards = torch.tensor([[0.5, 0.0], [0.0, 1.0]], dtype=torch.float64)
    out = token_advantages(mask, rewards, torch.tensor([2, 2]), ["p", "p"])
    # Turn 1: 0.5 - 1.0 = -0.5 and 1.0 - 0.5 = 0.5. Trajectory 0's turn 2 is a failure after success: no loss,
    # and no baseline for trajectory 1's turn 2, whose advantage is its return, 1.0.
    expected = [[0.0, -0.5, -0.5, 0.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.0, 1.0, 1.0]]
    assert out.advantages.flatten().tolist() == pytest.approx([x for row in expected for x in row])
    assert out.loss_mask.tolist() == [[F, T, T, F, F, F], [F, T, F, F, T, T]]
    # Returns use the same turns: trajectory 0's masked turn 2 adds nothing to its turn-1 return.
    returns = [[0.0, 0.5, 0.5, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0, 1.0, 1.0]]
    assert out.returns.flatten().tolist() == pytest.approx([x for row in returns for x in row])
    assert out.in_baseline.tolist() == [[T, F], [T, T]]


def test_prs_keep_removes_turns_from_the_loss_only():
    mask = torch.tensor([[T, F, T], [T, F, T]])
    rewards = torch.tensor([[1.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
    keep = torch.tensor([[F, T], [T, T]])
    out = token_advantages(mask, rewards, torch.tensor([2, 2]), ["p", "p"], keep=keep)
    assert out.advantages[0, 0].item() == pytest.approx(2.0)  # still computed, with its peer as baseline
    assert out.loss_mask.tolist() == [[F, F, T], [T, F, T]]
    assert out.in_loss.tolist() == [[F, T], [T, T]] and out.in_baseline.all()


def test_a_mask_that_disagrees_with_the_turn_count_is_an_error():
    with pytest.raises(ValueError, match="answer spans"):
        token_advantages(torch.tensor([[T, T, T]]), torch.zeros(1, 2, dtype=torch.float64), torch.tensor([2]), ["p"])


def test_turn_ids_number_the_answer_spans():
    mask = torch.tensor([[F, T, T, F, T], [T, F, F, F, F]])
    assert turn_ids(mask, torch.tensor([2, 1])).tolist() == [[-1, 0, 0, -1, 1], [0, -1, -1, -1, -1]]
