"""The local backend's decoder (`rl_client.local.decode`): static KV cache, one step per token (a CUDA graph replay
on a GPU), against Hugging Face `generate` with the same settings: the same tokens for the same random state, and
each token's log-prob from the logits that sampled it."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from rl_client.local import decode

PAD, EOS = 0, 2


def tiny_llama(dtype: torch.dtype = torch.float32, device: str = "cpu") -> LlamaForCausalLM:
    """SmolLM2's layout (grouped-query attention, tied embeddings), a few layers of a few dimensions."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True, bos_token_id=1,
        eos_token_id=EOS, pad_token_id=PAD,
    )  # fmt: skip
    return LlamaForCausalLM(config).eval().to(device=device, dtype=dtype)


def left_padded(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    prompts = [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14], [15, 16, 17, 18, 19]]
    width = max(map(len, prompts))
    ids = torch.tensor([[PAD] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    return ids, mask


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9)])
def test_the_decoder_samples_what_generate_samples_and_scores_each_token_by_its_sampling_logits(temperature, top_p):
    model, (ids, mask) = tiny_llama(), left_padded()
    steps = 20
    torch.manual_seed(1)
    hf = model.generate(
        ids,
        attention_mask=mask,
        do_sample=True,
        temperature=temperature,
        top_p=top_p,
        top_k=0,
        max_new_tokens=steps,
        output_logits=True,
        return_dict_in_generate=True,
        pad_token_id=PAD,
    )  # the model's EOS stops a row, as it does below
    torch.manual_seed(1)
    tokens, logprobs = decode.sample(model, ids, mask, decode.Sampling(temperature, top_p, steps, (EOS,), PAD))
    assert torch.equal(tokens, hf.sequences[:, ids.shape[1] :])
    raw = torch.stack(hf.logits, dim=1)  # [B, steps, vocab]: what sampled, before top-p
    expected = torch.log_softmax(raw / temperature, dim=-1).gather(2, tokens[..., None])[..., 0]
    assert torch.allclose(logprobs, expected, atol=1e-5)


def test_a_row_that_stops_gets_padding_and_decoding_ends_when_every_row_has_stopped():
    model, (ids, mask) = tiny_llama(), left_padded()
    torch.manual_seed(0)
    first, _ = decode.sample(model, ids, mask, decode.Sampling(1.0, 1.0, 12, (), PAD))
    stop = int(first[0, 3])  # row 0 samples it at step 3 (the same random state below)
    torch.manual_seed(0)
    tokens, logprobs = decode.sample(model, ids, mask, decode.Sampling(1.0, 1.0, 12, (stop,), PAD))
    for row in tokens.tolist():
        if stop in row:
            assert all(t == PAD for t in row[row.index(stop) + 1 :])
    ended = [row.index(stop) if stop in row else len(row) - 1 for row in tokens.tolist()]
    assert tokens.shape[1] == max(ended) + 1 <= 12 and ended[0] <= 3
    assert torch.isfinite(logprobs).all()
    torch.manual_seed(0)
    one, _ = decode.sample(model, ids, mask, decode.Sampling(1.0, 1.0, 12, tuple(range(96)), PAD))
    assert one.shape == (3, 1)  # every token stops: one step


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_cuda_graph_replays_decode_as_the_eager_steps_do(dtype, caplog):
    model, (ids, mask) = tiny_llama(dtype, "cuda"), left_padded("cuda")
    runs = []
    for graphs in (False, True):
        torch.manual_seed(2)
        runs.append(decode.sample(model, ids, mask, decode.Sampling(1.0, 1.0, 24, (), PAD), graphs=graphs))
    assert "without CUDA graphs" not in caplog.text  # the graph was captured and replayed, no fallback
    (eager, eager_lp), (graphed, graphed_lp) = runs
    assert torch.equal(eager, graphed)
    assert torch.allclose(eager_lp, graphed_lp, atol=1e-3)
