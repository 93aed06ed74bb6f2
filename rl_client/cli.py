"""`kernelgym-rl train --config FILE`: multi-turn RL against a KernelGym service with the local backend."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger("kernelgym.rl")


def load_problems(cfg: Any, client: Any) -> list[Any]:
    from rl_client.data import kernelbench_problems, parquet_problems, service_problems

    p = cfg.problems
    if p.source == "service":
        return service_problems(client, p.ids)
    if p.source == "kernelbench":
        return kernelbench_problems(p.path, p.ids)
    problems = parquet_problems(p.path, p.reference_column, p.id_column)
    return [q for q in problems if not p.ids or q.id in p.ids]


def train(cfg: Any) -> Path:
    """Run `cfg.steps` steps; returns the run directory (metrics.jsonl, TensorBoard events, checkpoints)."""
    import torch
    from torch.utils.tensorboard import SummaryWriter
    from tqdm import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gym_client import KernelGymClient
    from rl_client.algorithms import RewardSpec
    from rl_client.local.policy import LocalPolicy
    from rl_client.local.trainer import LocalTrainer
    from rl_client.scoring import ServiceScorer

    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(cfg.model_dump_json(indent=2))
    kwargs = {"gguf_file": cfg.gguf_file} if cfg.gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(cfg.model, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=getattr(torch, cfg.dtype), **kwargs).to(cfg.device)
    policy = LocalPolicy(model, tokenizer, cfg.device, cfg.temperature, cfg.top_p, cfg.max_new_tokens)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    api_key = cfg.service.api_key or os.environ.get("KERNELGYM_API_KEY")
    with KernelGymClient(cfg.service.url, api_key=api_key) as client:
        problems = load_problems(cfg, client)
        if not problems:
            raise ValueError("no problems to train on")
        scorer = ServiceScorer(
            client,
            RewardSpec(**cfg.reward.model_dump()),
            cfg.service.device_class,
            cfg.service.options,
            cfg.service.timeout_s,
            cfg.service.batch_size,
            cfg.service.concurrency,
        )
        trainer = LocalTrainer(cfg, policy, scorer, optimizer)
        writer = SummaryWriter(str(out / "tensorboard"))
        try:
            with (out / "metrics.jsonl").open("a") as jsonl:
                for step in tqdm(range(1, cfg.steps + 1), desc="steps", unit="step"):
                    chosen = rng.sample(problems, min(cfg.prompts_per_step, len(problems)))
                    metrics = trainer.step(chosen)
                    jsonl.write(json.dumps({"step": step, **metrics}) + "\n")
                    jsonl.flush()
                    for key, value in metrics.items():
                        if not math.isnan(value):
                            writer.add_scalar(key, value, step)
                    turns = " ".join(f"{metrics[f'reward/turn{t + 1}']:.2f}" for t in range(cfg.max_turns))
                    tqdm.write(
                        f"step {step}: reward by turn {turns}  correct {metrics['correct/turn1']:.2f}"
                        f"  fast@1.2 {metrics['fast_1.2']:.2f}  loss {metrics['train/loss']:.4g}"
                    )
                    if cfg.checkpoint_every and step % cfg.checkpoint_every == 0:
                        save(model, tokenizer, out / f"step-{step}")
        finally:
            writer.close()
            scorer.close()
    save(model, tokenizer, out / "final")
    return out


def save(model: Any, tokenizer: Any, path: Path) -> None:
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernelgym-rl", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train with the local backend")
    tr.add_argument("--config", type=Path, required=True, help="YAML training configuration")
    rs = sub.add_parser(
        "reward-server",
        help="serve OpenRLHF's remote reward (--reward.remote_url http://HOST:PORT/get_reward) from the service "
        "at KERNELGYM_URL",
    )
    rs.add_argument("--host", default="127.0.0.1")
    rs.add_argument("--port", type=int, default=8100)
    rs.add_argument("--answer-within", type=float, help="seconds before answering 504 (default 170)")
    args = parser.parse_args(argv)
    if args.command == "reward-server":
        from rl_client.adapters.openrlhf_reward import serve

        serve(args.host, args.port, args.answer_within)
        return 0
    from pydantic import ValidationError

    from rl_client.config import TrainConfig

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        cfg = TrainConfig.load(args.config)
    except (OSError, ValidationError) as exc:
        print(f"kernelgym-rl: bad configuration {args.config}: {exc}", file=sys.stderr)
        return 2
    out = train(cfg)
    print(f"done: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
