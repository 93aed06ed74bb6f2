"""End to end: a couple of training steps of a tiny causal LM against the live service (CPU workers).

The model is a 2-layer character-level GPT-2, first taught (400 steps of supervised training on a 910-character
prompt: under three minutes on two CPU cores, most of this test) to answer the ReLU problem with one of two kernels,
one right and one wrong, so that sampled answers earn different rewards and the policy gradient is not zero; with 200
steps no sampled kernel passed."""

from __future__ import annotations

import json

import torch
import yaml
from helpers import TINY_KERNEL, char_tokenizer
from transformers import GPT2Config, GPT2LMHeadModel

from rl_client.cli import main as rl_main
from rl_client.prompts import SYSTEM, first_turn

RELU = "level1/1_ReLU"
KERNEL = TINY_KERNEL


def tiny_model():
    tokenizer = char_tokenizer()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(vocab_size=len(tokenizer), n_positions=8192, n_embd=64, n_layer=2, n_head=4, eos_token_id=2)
    )
    return model, tokenizer


def prime(model, tokenizer, reference: str, steps: int = 400) -> None:
    """Supervised: after the first-turn prompt, answer with the right (floor 0.0) or wrong (floor 1.0) kernel."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": first_turn(reference)}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    targets = [[*tokenizer.encode(KERNEL.format(floor=f)), tokenizer.eos_token_id] for f in ("0.0", "1.0")]
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        answer = targets[step % 2]
        ids = torch.tensor([prompt + answer], device=model.device)
        labels = torch.tensor([[-100] * len(prompt) + answer], device=model.device)
        loss = model(ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1, f"priming did not converge (loss {loss.item():.3f})"


def test_two_training_steps_against_the_live_service(stack, problems, tmp_path):
    model, tokenizer = tiny_model()
    prime(model, tokenizer, problems.load(RELU).source)
    model.save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    config = {
        "model": str(tmp_path / "tiny"),
        "service": {"url": stack.base_url, "timeout_s": 300},
        "problems": {"source": "service", "ids": [RELU]},
        "steps": 2,
        "prompts_per_step": 1,
        "samples_per_prompt": 4,
        "max_turns": 2,
        "max_new_tokens": 600,
        "lr": 1e-3,
        "loss_scale": 1.0,
        "out_dir": str(tmp_path / "run"),
    }
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(config))
    assert rl_main(["train", "--config", str(tmp_path / "train.yaml")]) == 0
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    rewards = [s[f"reward/turn{t}"] for s in steps for t in (1, 2)]
    assert any(r > 0 for r in rewards), "no kernel passed: rewards never arrived"
    assert all(s["advantage/finite"] == 1.0 for s in steps)
    assert all(0.0 <= s["no_code"] < 1.0 for s in steps)  # some turn's code reached the service each step
    assert any(s["advantage/abs_mean"] > 0 and s["train/rows"] > 0 for s in steps)
    trained = GPT2LMHeadModel.from_pretrained(tmp_path / "run" / "final")
    changed = [k for k, v in trained.state_dict().items() if k in before and not torch.equal(v, before[k])]
    assert changed, "the update left every weight unchanged"
    assert (tmp_path / "run" / "tensorboard").is_dir()


def test_a_bad_configuration_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"model": "x", "stepz": 3}))
    assert rl_main(["train", "--config", str(tmp_path / "bad.yaml")]) == 2
    assert "stepz" in capsys.readouterr().err


def test_the_configured_optimizer_is_built_and_sgd_keeps_the_gradients_scale():
    from rl_client.config import TrainConfig
    from rl_client.local.trainer import make_optimizer

    weight = torch.nn.Parameter(torch.zeros(2))
    assert isinstance(make_optimizer(TrainConfig(model="m"), [weight]), torch.optim.AdamW)
    sgd = make_optimizer(TrainConfig(model="m", optimizer="sgd", lr=0.5), [weight])
    for scale in (1.0, 3.0):  # the update is lr x gradient: a gradient three times larger moves three times as far
        weight.data.zero_()
        weight.grad = torch.tensor([scale, -scale])
        sgd.step()
        assert weight.tolist() == [-0.5 * scale, 0.5 * scale]
