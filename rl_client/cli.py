"""`kernelgym-rl train --config FILE`: multi-turn RL against a KernelGym service with the local backend.

Also `kernelgym-rl demo-learn` (a small policy learning from a private service), `collect` and `sft` (trajectories
and a cold start on them), `serve-model`, `evaluate`, `reward-server`, `episode-server` and `openrlhf-prompts`."""

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

from rl_client.settings import ConfigurationError, RLSettings

log = logging.getLogger("kernelgym.rl")


def load_problems(p: Any, client: Any) -> list[Any]:
    """The problems a `ProblemsConfig` names; `client` is used only for the service's own problem set."""
    from rl_client.data import kernelbench_problems, parquet_problems, service_problems

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

    from gym_client import KernelGymClient
    from rl_client.local.policy import LocalPolicy, load_pretrained
    from rl_client.local.trainer import LocalTrainer, make_optimizer
    from rl_client.scoring import ServiceScorer

    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(cfg.model_dump_json(indent=2))
    model, tokenizer = load_pretrained(cfg.model, cfg.gguf_file, cfg.dtype, cfg.device)
    policy = LocalPolicy(
        model,
        tokenizer,
        cfg.device,
        cfg.temperature,
        cfg.top_p,
        cfg.max_new_tokens,
        cfg.rollout_dtype,
        cfg.generate_batch_size,
    )
    optimizer = make_optimizer(cfg, model.parameters())
    service = cfg.service
    settings = RLSettings.from_env(
        url=service.url, api_key=service.api_key, device_class=service.device_class, timeout_s=service.timeout_s
    )
    with KernelGymClient(settings.url, api_key=settings.api_key) as client:
        problems = load_problems(cfg.problems, client)
        if not problems:
            raise ValueError("no problems to train on")
        scorer = ServiceScorer(
            client,
            cfg.reward,
            settings.device_class,
            service.options,
            settings.timeout_s,
            service.batch_size,
            service.concurrency,
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


def evaluate(args: argparse.Namespace) -> int:
    """`kernelgym-rl evaluate`: samples × turns per problem, scored by the service; prints the table."""
    import json

    from rl_client.data import kernelbench_problems, service_problems
    from rl_client.model_eval import OpenAIGenerator, plot, report, sequential_scaling, table

    ids = args.problems.split(",") if args.problems else None
    scorer = RLSettings.from_env(url=args.service).scorer()
    with scorer.client as client:
        problems = kernelbench_problems(args.kernelbench, ids) if args.kernelbench else service_problems(client, ids)
        generator = OpenAIGenerator(
            args.model_url,
            args.model,
            api_key=os.environ.get("OPENAI_API_KEY"),
            temperature=args.temperature,
            max_tokens=args.max_tokens,
        )
        try:
            windows = sequential_scaling(problems, args.samples, generator, scorer, args.turns, args.iterations)
        finally:
            generator.close()
            scorer.close()
        evaluated = next((t.outcome.evaluation_id for e in windows[0] for t in e.turns if t.outcome.verdict), None)
        env = client.get(evaluated).result.get("environment", {}) if evaluated else {}
    rep = {
        "model": args.model,
        "problems": len(problems),
        "samples": args.samples,
        "turns": args.turns,
        "iterations": args.iterations,
        "protocol_version": env.get("protocol_version"),
        "gpu": env.get("gpu_name") or env.get("device"),
        "generation_failures": generator.failures,
        **report(windows),
    }
    print(
        f"{args.model}: {len(problems)} problems x {args.samples} samples x {args.turns} turns "
        f"x {args.iterations} iteration(s), "
        f"protocol {rep['protocol_version']}, {rep['gpu']}"
    )
    print(table(rep))
    if args.plot:
        plot(rep, str(args.plot))
    if args.out:
        turns = [
            {
                "problem": e.problem.id,
                "iteration": w,
                "sample": i,
                "turn": t,
                "answer": turn.answer,
                "verdict": turn.outcome.verdict,
                "speedup": turn.outcome.speedup,
                "coverage": turn.outcome.coverage,
                "reward": turn.outcome.reward.reward,
                "feedback": turn.outcome.feedback,
                "evaluation_id": turn.outcome.evaluation_id,
            }
            for w, window in enumerate(windows)
            for i, e in enumerate(window)
            for t, turn in enumerate(e.turns)
        ]
        args.out.write_text(json.dumps({"report": rep, "turns": turns}, indent=1))
    return 0


def collect(args: argparse.Namespace) -> int:
    """`kernelgym-rl collect`: multi-turn episodes of a model against the service, as JSONL trajectories."""
    import torch

    from rl_client.collect import collect as collect_records
    from rl_client.collect import local_generator, sft_ready, write_jsonl
    from rl_client.data import kernelbench_problems, service_problems
    from rl_client.model_eval import OpenAIGenerator

    torch.manual_seed(args.seed)
    ids = args.problems.split(",") if args.problems else None
    scorer = RLSettings.from_env(url=args.service).scorer()
    generator = None
    if args.model_url:
        generator = OpenAIGenerator(
            args.model_url,
            args.model or "default",
            api_key=os.environ.get("OPENAI_API_KEY"),
            temperature=args.temperature,
            max_tokens=args.max_tokens,
            top_p=args.top_p,
        )
        generate = generator
    else:
        from rl_client.local.policy import LocalPolicy, load_pretrained

        model, tokenizer = load_pretrained(args.hf_model, args.gguf_file, args.dtype, args.device)
        generate = local_generator(
            LocalPolicy(model, tokenizer, args.device, args.temperature, args.top_p, args.max_tokens)
        )
    with scorer.client as client:
        problems = kernelbench_problems(args.kernelbench, ids) if args.kernelbench else service_problems(client, ids)
        try:
            records = collect_records(problems, args.samples, generate, scorer, args.turns, args.feedback_chars)
        finally:
            scorer.close()
            if generator is not None:
                generator.close()
    written = write_jsonl(records, args.out)
    kept = [r for r in records if sft_ready(r, args.min_speedup)]
    print(f"wrote {written} trajectories ({len(problems)} problems x {args.samples} samples) to {args.out}")
    if args.sft_out:
        print(f"wrote {write_jsonl(kept, args.sft_out)} fit for SFT to {args.sft_out}")
    return 0


def sft(args: argparse.Namespace) -> int:
    """`kernelgym-rl sft`: fine-tune on collected trajectories, the loss on the assistant's tokens only."""
    from rl_client.collect import passed_answers, read_jsonl, sft_ready
    from rl_client.local.policy import load_pretrained
    from rl_client.sft import SFTConfig, train_sft

    records = read_jsonl(args.data)
    if args.filter:
        records = [r for r in records if sft_ready(r, args.min_speedup)]
    if not records:
        print(f"kernelgym-rl sft: no trajectory to learn from in {args.data}", file=sys.stderr)
        return 2
    cfg = SFTConfig(
        lr=args.lr,
        epochs=args.epochs,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        max_length=args.max_length,
        seed=args.seed,
        stop_loss=args.stop_loss,
    )
    model, tokenizer = load_pretrained(args.model, args.gguf_file, args.dtype, args.device)
    learn = None if args.all_answers else [passed_answers(r) for r in records]
    losses = train_sft(model, tokenizer, [r["messages"] for r in records], cfg, args.device, learn)
    args.out.mkdir(parents=True, exist_ok=True)
    save(model, tokenizer, args.out)
    (args.out / "sft_losses.json").write_text(json.dumps(losses))
    print(
        f"{len(records)} trajectories, {len(losses)} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}; saved {args.out}"
    )
    return 0


def openrlhf_prompts(args: argparse.Namespace) -> int:
    """`kernelgym-rl openrlhf-prompts`: the chosen problems as an OpenRLHF prompt dataset."""
    from gym_client import KernelGymClient
    from rl_client.config import ProblemsConfig
    from rl_client.data import write_openrlhf_prompts

    chosen = ProblemsConfig(
        source="service" if args.service else "kernelbench" if args.kernelbench else "parquet",
        path=None if args.service else str(args.kernelbench or args.parquet),
        ids=args.problems.split(",") if args.problems else None,
        reference_column=args.reference_column,
        id_column=args.id_column,
    )
    if args.service:
        with KernelGymClient(args.service, api_key=RLSettings.from_env().api_key, timeout=60) as client:
            problems = load_problems(chosen, client)
    else:
        problems = load_problems(chosen, None)
    print(f"wrote {write_openrlhf_prompts(problems, args.out)} prompts to {args.out}")
    return 0


def demo_learn(args: argparse.Namespace) -> int:
    """`kernelgym-rl demo-learn`: prime a tiny policy and train it on the service's rewards, a line per step."""
    import signal

    from rl_client.demo import DemoOptions, run

    # A plain SIGTERM would leave the private stack's Redis, gateway and worker running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    opts = DemoOptions(
        estimator=args.estimator,
        device=args.device,
        steps=args.steps,
        seed=args.seed,
        samples=args.samples,
        lr=args.lr,
        optimizer=args.optimizer,
        problems=args.problems,
        out_dir=str(args.out),
    )

    def log(message: str) -> None:
        print(message, file=sys.stderr if args.json else sys.stdout, flush=True)

    def emit(r: dict[str, Any]) -> None:
        if args.json:
            print(json.dumps(r), flush=True)
            return
        turns = ", ".join(f"turn {t} {r[f'correct_turn{t}']:.2f}" for t in (1, 2))
        log(
            f"step {r['step']:>3}/{opts.steps}  correct {r['correct_rate']:.2f} ({turns})  hacks {r['hack_rate']:.2f}"
            f"  wrong {r['wrong_rate']:.2f}  reward {r['reward_mean']:.3f}  {r['new_evaluations']} new evaluations"
            f"  {r['seconds']:.1f} s"
        )

    result = run(opts, args.service, emit, log)
    if args.json:
        print(json.dumps(result), flush=True)
    else:
        log(
            f"{opts.estimator}: correct {result['first_correct_rate']:.2f} -> {result['last_correct_rate']:.2f}, "
            f"hacks {result['first_hack_rate']:.2f} -> {result['last_hack_rate']:.2f}, "
            f"90% correct first at step {result['steps_to_90']}, {result['seconds']:.0f} s"
            f"{'' if result['target_met'] else ' (target not met: <=0.6 first, >=0.9 last, no hacks at the end)'}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernelgym-rl", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    dl = sub.add_parser(
        "demo-learn",
        help="watch a small policy learn from the service's rewards: a private stack, a primed tiny GPT-2, TRLOO",
    )
    dl.add_argument("--estimator", choices=["trloo", "grpo"], default="trloo")
    dl.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="the policy's and the worker's device")
    dl.add_argument("--steps", type=int, default=60)
    dl.add_argument("--seed", type=int, default=0)
    dl.add_argument("--samples", type=int, default=4, help="episodes per problem and step")
    dl.add_argument("--lr", type=float, default=5e-4)
    dl.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw", help="sgd keeps the gradient's scale")
    dl.add_argument("--problems", type=int, default=3, choices=[1, 2, 3], help="how many of the demo's problems")
    dl.add_argument("--service", help="use this running service instead of starting a private one")
    dl.add_argument("--out", type=Path, default=Path("runs/demo-learn"), help="the primed model goes here")
    dl.add_argument("--json", action="store_true", help="one JSON object per step, then a summary line")
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
    es = sub.add_parser("episode-server", help="multi-turn episodes over HTTP (/episodes), scored by KERNELGYM_URL")
    es.add_argument("--redis", required=True, help="Redis URL where episodes are kept, e.g. redis://127.0.0.1:6379/1")
    es.add_argument("--host", default="127.0.0.1")
    es.add_argument("--port", type=int, default=8200)
    es.add_argument("--ttl", type=int, default=86_400, help="seconds an episode is kept after its last step")
    op = sub.add_parser(
        "openrlhf-prompts",
        help="write an OpenRLHF prompt dataset (JSONL) for rl_client.openrlhf_train and rl_client/openrlhf_agent.py",
    )
    op.add_argument("--out", type=Path, required=True)
    op_src = op.add_mutually_exclusive_group(required=True)
    op_src.add_argument("--service", help="the service's problem set, evaluated by id (KERNELGYM_API_KEY if needed)")
    op_src.add_argument("--kernelbench", type=Path, help="a KernelBench-layout directory (references sent inline)")
    op_src.add_argument("--parquet", type=Path, help="a Parquet file with one reference per row (sent inline)")
    op.add_argument("--problems", help="comma-separated problem ids (default: all)")
    op.add_argument("--reference-column", default="reference")
    op.add_argument("--id-column")
    co = sub.add_parser("collect", help="multi-turn trajectories of a model against the service, as JSONL (for sft)")
    co_model = co.add_mutually_exclusive_group(required=True)
    co_model.add_argument("--model-url", help="base URL of an OpenAI-compatible API, e.g. http://h:8000/v1")
    co_model.add_argument("--hf-model", help="a local Hugging Face model directory (or the directory of --gguf-file)")
    co.add_argument("--model", help="the model name sent to --model-url")
    co.add_argument("--gguf-file", help="load --hf-model from this GGUF file inside it")
    co.add_argument("--device", default="cpu", help="--hf-model's device")
    co.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    co.add_argument("--service", help="KernelGym service URL (default: KERNELGYM_URL, else http://127.0.0.1:8000)")
    co.add_argument("--problems", help="comma-separated problem ids (default: all)")
    co.add_argument("--kernelbench", type=Path, help="a KernelBench-layout directory instead of the service's set")
    co.add_argument("--samples", type=int, default=4, help="episodes per problem")
    co.add_argument("--turns", type=int, default=3)
    co.add_argument("--temperature", type=float, default=1.0)
    co.add_argument("--top-p", type=float, default=1.0)
    co.add_argument("--max-tokens", type=int, default=4096, help="tokens per answer")
    co.add_argument("--feedback-chars", type=int, default=2000)
    co.add_argument("--seed", type=int, default=0)
    co.add_argument("--out", type=Path, required=True, help="every trajectory, one JSON object a line")
    co.add_argument("--sft-out", type=Path, help="also write the trajectories fit for SFT here")
    co.add_argument(
        "--min-speedup", type=float, help="for --sft-out: the last answer's speedup at least this (needs a GPU service)"
    )
    sf = sub.add_parser("sft", help="cold start: fine-tune on collected trajectories, loss on assistant tokens only")
    sf.add_argument("--data", type=Path, required=True, help="trajectories from `kernelgym-rl collect`")
    sf.add_argument("--model", required=True, help="a local Hugging Face model directory (or of --gguf-file)")
    sf.add_argument("--gguf-file")
    sf.add_argument("--out", type=Path, required=True, help="the checkpoint directory")
    sf.add_argument("--filter", action="store_true", help="keep only trajectories fit for SFT (see collect)")
    sf.add_argument("--min-speedup", type=float, help="with --filter: the last answer's speedup at least this")
    sf.add_argument(
        "--all-answers",
        action="store_true",
        help="learn every answer, the failed ones too (default: only the answers the service passed; the others "
        "stay in the context)",
    )
    sf.add_argument("--lr", type=float, default=1e-5)
    sf.add_argument("--epochs", type=int, default=1)
    sf.add_argument("--max-steps", type=int)
    sf.add_argument(
        "--stop-loss",
        type=float,
        help="stop once the mean loss of the last 4 steps is at most this (a partial cold start)",
    )
    sf.add_argument("--batch-size", type=int, default=4)
    sf.add_argument("--max-length", type=int, default=4096)
    sf.add_argument("--device", default="cpu")
    sf.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    sf.add_argument("--seed", type=int, default=0)
    sm = sub.add_parser("serve-model", help="an OpenAI-compatible chat server around a local Hugging Face model")
    sm.add_argument("--model", required=True, help="a local Hugging Face model directory (or of --gguf-file)")
    sm.add_argument("--gguf-file")
    sm.add_argument("--name", help="the model's name in the API (default: the file or directory)")
    sm.add_argument("--host", default="127.0.0.1")
    sm.add_argument("--port", type=int, default=8300)
    sm.add_argument("--device", default="cpu")
    sm.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    ev = sub.add_parser("evaluate", help="evaluate a model behind an OpenAI-compatible endpoint: Fast@p per turn")
    ev.add_argument("--model-url", required=True, help="base URL of the OpenAI-compatible API, e.g. http://h:8000/v1")
    ev.add_argument("--model", required=True)
    ev.add_argument("--service", help="KernelGym service URL (default: KERNELGYM_URL, else http://127.0.0.1:8000)")
    ev.add_argument("--problems", help="comma-separated problem ids of the service (default: all)")
    ev.add_argument("--kernelbench", type=Path, help="a KernelBench-layout directory instead of the service's set")
    ev.add_argument("--samples", type=int, default=1)
    ev.add_argument("--turns", type=int, default=3)
    ev.add_argument(
        "--iterations",
        type=int,
        default=1,
        help="sequential test-time scaling: windows of --turns turns, each restarting from the best turn so far",
    )
    ev.add_argument("--temperature", type=float, default=1.0)
    ev.add_argument("--max-tokens", type=int, default=8192)
    ev.add_argument("--out", type=Path, help="write the report and every turn as JSON here")
    ev.add_argument("--plot", type=Path, help="write a bar chart of correctness and Fast@p per turn here (PNG)")
    args = parser.parse_args(argv)
    try:
        return _command(args)
    except ConfigurationError as exc:  # one line naming the variable, not a traceback
        print(f"kernelgym-rl {args.command}: {exc}", file=sys.stderr)
        return 2


def _command(args: argparse.Namespace) -> int:
    if args.command == "demo-learn":
        return demo_learn(args)
    if args.command == "evaluate":
        return evaluate(args)
    if args.command == "collect":
        return collect(args)
    if args.command == "sft":
        return sft(args)
    if args.command == "serve-model":
        from rl_client.model_server import serve as serve_model

        serve_model(args.model, args.gguf_file, args.name, args.host, args.port, args.device, args.dtype)
        return 0
    if args.command == "openrlhf-prompts":
        return openrlhf_prompts(args)
    if args.command == "episode-server":
        from rl_client.adapters.episodes import serve as serve_episodes

        serve_episodes(args.redis, args.host, args.port, args.ttl)
        return 0
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
