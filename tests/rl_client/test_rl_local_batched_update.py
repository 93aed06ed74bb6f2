"""The local trainer's batched update against the row-by-row one it replaced: right-padded rows of different prompt
and response lengths, in micro-batches within a token budget, give each response the log-probs it has alone, and
one optimiser step moves the weights as one backward per row does."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from test_rl_local_decode import EOS, PAD, tiny_llama
from transformers import GPT2Config, GPT2LMHeadModel

from rl_client.config import TrainConfig
from rl_client.local.policy import MAX_PADDING, LocalPolicy, Sample
from rl_client.local.trainer import LocalTrainer, Row, policy_loss

TEMPERATURE = 0.7


def samples() -> list[Sample]:
    """Prompts of 1 to 9 tokens and responses of 1 to 11, long and short paired both ways."""
    g = torch.Generator().manual_seed(0)
    shapes = [(9, 3), (2, 11), (5, 5), (1, 1), (7, 8), (3, 2), (9, 11), (4, 1)]
    return [
        Sample(
            torch.randint(3, 96, (p,), generator=g).tolist(),
            torch.randint(3, 96, (r,), generator=g).tolist(),
            torch.zeros(r),
        )
        for p, r in shapes
    ]


def policy(model: torch.nn.Module, tokens_per_batch: int) -> LocalPolicy:
    tokenizer = SimpleNamespace(pad_token_id=PAD, eos_token_id=EOS)
    return LocalPolicy(model, tokenizer, "cpu", TEMPERATURE, 1.0, 8, train_tokens_per_batch=tokens_per_batch)


def tiny_gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=96, n_positions=64, n_embd=32, n_layer=2, n_head=2)).eval()


@pytest.mark.parametrize("make", [tiny_llama, tiny_gpt2])
def test_a_right_padded_batch_gives_the_real_tokens_the_logits_they_have_alone(make):
    """With a padding mask or without one (as `padded_logprobs` runs it: causal attention already keeps a real token
    from the padding after it), and with positions 0, 1, ... given or left to the model."""
    model = make()
    rows = [s.prompt_ids + s.response_ids for s in samples()]
    width = max(map(len, rows))
    ids = torch.tensor([r + [PAD] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    positions = torch.arange(width).expand(len(rows), width)
    with torch.no_grad():
        padded = [
            model(input_ids=ids, attention_mask=mask, position_ids=positions).logits,
            model(input_ids=ids, attention_mask=mask).logits,
            model(input_ids=ids, position_ids=positions).logits,
        ]
        for i, r in enumerate(rows):
            alone = model(torch.tensor([r])).logits[0]
            for logits in padded:
                assert torch.allclose(logits[i, : len(r)], alone, atol=1e-5)


@pytest.mark.parametrize("tokens_per_batch", [1, 25, 10_000])
def test_micro_batches_are_sorted_by_length_within_the_token_budget_and_the_padding_share(tokens_per_batch):
    batch = samples()
    groups = policy(tiny_llama(), tokens_per_batch).micro_batches(batch)
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in batch]  # 12, 13, 10, 2, 15, 5, 20, 5
    assert [lengths[i] for g in groups for i in g] == sorted(lengths)
    assert sorted(i for g in groups for i in g) == list(range(len(batch)))
    for g in groups:
        padded = len(g) * max(lengths[i] for i in g)
        assert len(g) == 1 or (padded <= tokens_per_batch and sum(lengths[i] for i in g) >= (1 - MAX_PADDING) * padded)
    # by length, at most a tenth padding: [2] (with 5: 3 of 10 tokens), [5, 5] (with 10: 10 of 30), [10, 12] (with
    # 13: 4 of 39), then 25: [13], [15], [20] (2 x 15 > 25, 2 x 20 > 25); 10,000: [13, 15] (with 20: 12 of 60), [20]
    assert MAX_PADDING == 0.1
    assert [len(g) for g in groups] == {1: [1] * 8, 25: [1, 2, 2, 1, 1, 1], 10_000: [1, 2, 2, 2, 1]}[tokens_per_batch]


@pytest.mark.parametrize("make", [tiny_llama, tiny_gpt2])
@pytest.mark.parametrize("tokens_per_batch", [1, 25, 10_000])
def test_batched_log_probs_are_the_row_wise_ones(make, tokens_per_batch):
    batch = samples()
    p = policy(make(), tokens_per_batch)
    with torch.no_grad():
        row_wise = [p.token_logprobs(s) for s in batch]
        batched = p.batched_logprobs(batch)
        all_at_once = p.padded_logprobs(batch)  # one forward, padded to twice the mean length
        for logprobs in (batched, all_at_once):
            for s, got, expected in zip(batch, logprobs, row_wise, strict=True):
                assert got.shape == (len(s.response_ids),)
                assert torch.allclose(got, expected, atol=1e-5, rtol=0)


def rows(p: LocalPolicy) -> list[Row]:
    """Advantages of both signs; π_old off from π by up to ±2 nats, so that ratios fall inside and outside the clip
    and the dual clip; some tokens not kept by MRS."""
    g = torch.Generator().manual_seed(1)
    out = []
    for k, s in enumerate(samples()):
        with torch.no_grad():
            new = p.token_logprobs(s)
        old = new + 4 * torch.rand(len(new), generator=g) - 2
        keep = torch.rand(len(new), generator=g) > 0.2
        keep[0] = True
        out.append(Row(s, old, keep, advantage=[1.5, -0.7, 0.3, -2.0][k % 4]))
    return out


def row_wise_step(trainer: LocalTrainer, batch: list[Row]) -> tuple[float, float]:
    """The update as it was: one forward and backward per row; (loss, gradient norm)."""
    cfg, model = trainer.cfg, trainer.policy.model
    model.train()
    trainer.optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for row in batch:
        new = trainer.policy.token_logprobs(row.sample)
        tokens = policy_loss(new, row.old, row.advantage, cfg.clip_low, cfg.clip_high, cfg.dual_clip)
        loss = (tokens * row.keep).sum() / (len(batch) * cfg.loss_scale)
        loss.backward()
        total += loss.item()
    grad_norm = float(torch.nn.utils.clip_grad_norm_(list(model.parameters()), cfg.max_grad_norm))
    trainer.optimizer.step()
    return total, grad_norm


@pytest.mark.parametrize(("tokens_per_batch", "max_padding"), [(25, MAX_PADDING), (10_000, 1.0)])
def test_one_batched_update_step_moves_the_weights_as_the_row_wise_step_does(
    tokens_per_batch, max_padding, monkeypatch
):
    monkeypatch.setattr("rl_client.local.policy.MAX_PADDING", max_padding)  # 1.0: all eight rows in one forward
    cfg = TrainConfig(model="tiny", optimizer="sgd", lr=0.5, loss_scale=1.0, max_grad_norm=1.0)
    model = tiny_llama()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batched = LocalTrainer(cfg, policy(model, tokens_per_batch), None, torch.optim.SGD(model.parameters(), lr=cfg.lr))
    reference_model = copy.deepcopy(model)
    reference = LocalTrainer(
        cfg, policy(reference_model, 1), None, torch.optim.SGD(reference_model.parameters(), lr=cfg.lr)
    )
    batch = rows(batched.policy)
    assert len(batched.policy.micro_batches([r.sample for r in batch])) == (6 if max_padding < 1 else 1)
    with torch.no_grad():
        ratios = [torch.exp(batched.policy.token_logprobs(r.sample) - r.old) for r in batch]
    assert any(bool((q < 1 - cfg.clip_low).any() | (q > 1 + cfg.clip_high).any()) for q in ratios)
    assert any(r.advantage < 0 and bool((q > cfg.dual_clip).any()) for r, q in zip(batch, ratios, strict=True))
    metrics = batched.update(batch)
    loss, grad_norm = row_wise_step(reference, batch)
    assert metrics["train/rows"] == len(batch)
    assert metrics["train/loss"] == pytest.approx(loss, rel=1e-5)
    assert metrics["train/grad_norm"] == pytest.approx(grad_norm, rel=1e-5)
    assert grad_norm > cfg.max_grad_norm  # the clip acts, on both sides alike
    trained, expected = model.state_dict(), reference_model.state_dict()
    moved = 0
    for name, start in before.items():
        assert torch.allclose(trained[name] - start, expected[name] - start, atol=1e-6, rtol=1e-4), name
        moved += int(not torch.equal(trained[name], start))
    assert moved > 0


def test_an_update_with_no_rows_leaves_the_weights_alone():
    cfg = TrainConfig(model="tiny", optimizer="sgd", lr=0.5)
    model = tiny_llama()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = LocalTrainer(cfg, policy(model, 25), None, torch.optim.SGD(model.parameters(), lr=cfg.lr))
    assert trainer.update([]) == {"train/loss": 0.0, "train/grad_norm": 0.0, "train/rows": 0.0}
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_mini_batches_take_one_optimiser_step_per_disjoint_share_of_the_rows():
    """Three mini-batches of eight rows: steps on 3, 3 and 2 rows in a random order that covers every row once,
    each as the row-wise step on its share, the later ones' ratios still against the rollout's π_old."""
    cfg = TrainConfig(model="tiny", optimizer="sgd", lr=0.5, loss_scale=1.0, max_grad_norm=1.0, mini_batches=3)
    model = tiny_llama()
    trainer = LocalTrainer(cfg, policy(model, 25), None, torch.optim.SGD(model.parameters(), lr=cfg.lr))
    reference_model = copy.deepcopy(model)
    reference = LocalTrainer(
        cfg, policy(reference_model, 1), None, torch.optim.SGD(reference_model.parameters(), lr=cfg.lr)
    )
    batch = rows(trainer.policy)
    shares = []
    update = trainer.update
    trainer.update = lambda share: shares.append([batch.index(r) for r in share]) or update(share)
    metrics = trainer.update_in_mini_batches(batch)
    assert [len(s) for s in shares] == [3, 3, 2]
    assert sorted(i for s in shares for i in s) == list(range(8))
    assert [i for s in shares for i in s] != list(range(8))  # shuffled
    expected = [row_wise_step(reference, [batch[i] for i in s]) for s in shares]
    assert metrics["train/rows"] == 8
    assert metrics["train/loss"] == pytest.approx(sum(loss for loss, _ in expected) / 3, rel=1e-4)
    assert metrics["train/grad_norm"] == pytest.approx(sum(norm for _, norm in expected) / 3, rel=1e-4)
    trained, reference_weights = model.state_dict(), reference_model.state_dict()
    for name, weights in trained.items():
        assert torch.allclose(weights, reference_weights[name], atol=1e-6, rtol=1e-4), name
