"""The local backend's sampler against its trainer: rollout and training log-probs come from one distribution
(so MRS keeps honest trajectories under top-p sampling), and a bf16 sampler copy gives a real, small mismatch."""

from __future__ import annotations

import torch
from helpers import char_tokenizer
from transformers import GPT2Config, GPT2LMHeadModel

from rl_client.algorithms import mismatch_rejection
from rl_client.local.policy import LocalPolicy

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "write a kernel"}]


def tiny_policy(top_p: float, rollout_dtype: str | None = None) -> LocalPolicy:
    tokenizer = char_tokenizer()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=256, n_embd=32, n_layer=1, n_head=2))
    return LocalPolicy(model, tokenizer, "cpu", 0.7, top_p, max_new_tokens=24, rollout_dtype=rollout_dtype)


def ratio(policy: LocalPolicy) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(rollout log-probs, training log-probs, MRS's ratio) for one sampled answer."""
    _, [sample] = policy.generate([MESSAGES])
    with torch.no_grad():
        train = policy.token_logprobs(sample)
    rollout = sample.rollout_logprobs
    turn_ids = torch.zeros(1, len(train), dtype=torch.long)
    result = mismatch_rejection(train[None].double(), rollout[None].double(), turn_ids)
    assert bool(result.kept[0]) == (0.999 <= result.ratio[0] <= 1.001)
    return rollout, train, result.ratio[0].item()


def test_a_batch_of_prompts_of_different_lengths_samples_as_one_prompt_alone_would():
    policy = tiny_policy(top_p=1.0)
    histories = [MESSAGES, [MESSAGES[0], {"role": "user", "content": "a much longer request for a kernel"}], MESSAGES]
    _, samples = policy.generate(histories)
    assert len({len(s.prompt_ids) for s in samples}) == 2  # left padding in the batch
    with torch.no_grad():
        for s in samples:  # the padded batch's log-probs are those of each sequence on its own
            assert torch.allclose(s.rollout_logprobs, policy.token_logprobs(s), atol=1e-5)


def test_top_p_sampling_is_not_a_mismatch():
    # top_p 0.3 on a near-uniform tiny model filters most of the vocabulary: log-probs taken after the filter
    # would be log(1/0.3) larger per token, and MRS would reject every trajectory.
    rollout, train, rho = ratio(tiny_policy(top_p=0.3))
    assert torch.allclose(rollout, train, atol=1e-5)
    assert abs(rho - 1.0) < 1e-5


def test_a_bf16_sampler_is_a_small_real_mismatch_that_sync_keeps_up_to_date():
    policy = tiny_policy(top_p=1.0, rollout_dtype="bfloat16")
    assert policy.sampler is not policy.model and next(policy.sampler.parameters()).dtype == torch.bfloat16
    rollout, train, rho = ratio(policy)
    assert not torch.equal(rollout, train) and 0.9 < rho < 1.1  # bf16 rounding, not another policy
    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(0.01)
    policy.sync()
    for mine, trained in zip(policy.sampler.parameters(), policy.model.parameters(), strict=True):
        assert torch.equal(mine, trained.to(torch.bfloat16))
    same = tiny_policy(top_p=1.0, rollout_dtype="float32")  # the trained dtype already: no copy
    assert same.sampler is same.model
