"""`kernelgym`: evaluate kernels from the command line, run the service, or try the whole stack locally.

kernelgym eval ...        one evaluation in this process (see `kernelgym eval --help`)
kernelgym demo            start Redis, a gateway and a worker locally, post the bundled examples, print verdicts
kernelgym demo --in-process   the same examples through the evaluation core directly
kernelgym serve           the HTTP gateway
kernelgym worker          a worker for one device
kernelgym hash-key KEY    the digest to put in KERNELGYM_API_KEY_HASHES
kernelgym healthcheck http|worker   exit 0 when healthy (container health checks and probes)
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the settings module is imported only by the commands that need it
    from gym_common.settings import ServiceSettings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelgym", description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("eval", help="evaluate one candidate against one reference", add_help=False)
    demo = sub.add_parser("demo", help="evaluate the bundled examples through a local service")
    demo.add_argument("--in-process", action="store_true", help="use the evaluation core directly, no service")
    demo.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when available, else cpu")
    sub.add_parser("serve", help="run the HTTP gateway (settings from KERNELGYM_* variables)")
    worker = sub.add_parser("worker", help="run a worker for one device")
    worker.add_argument("--device-class", help="`cpu` or a GPU type such as `h100` (default: settings)")
    worker.add_argument("--gpu", type=int, help="GPU index to pin with CUDA_VISIBLE_DEVICES")
    worker.add_argument("--name", help="Celery node name (default: derived from class, GPU and pid)")
    key = sub.add_parser("hash-key", help="print the SHA-256 digest of an API key")
    key.add_argument("key")
    health = sub.add_parser("healthcheck", help="exit 0 when healthy, 1 when not (for container health checks)")
    probe = health.add_subparsers(dest="probe", required=True)
    http = probe.add_parser("http", help="a server's /healthz answers 200 (the gateway by default)")
    http.add_argument("--url", help="default: http://127.0.0.1:$KERNELGYM_PORT/healthz")
    http.add_argument("--timeout", type=float, default=3.0)
    beat = probe.add_parser("worker", help="a worker process on this host has a fresh heartbeat in Redis")
    beat.add_argument("--hostname", help="whose workers to look for (default: this host's name)")
    beat.add_argument("--allow-quarantined", action="store_true", help="a quarantined GPU still counts as alive")
    return parser


def healthcheck(args: argparse.Namespace, settings: ServiceSettings) -> int:
    from kernelgym.probes import probe_http, probe_worker

    if args.probe == "http":
        ok, message = probe_http(args.url or f"http://127.0.0.1:{settings.port}/healthz", args.timeout)
    else:
        ok, message = probe_worker(settings, args.hostname, args.allow_quarantined)
    print(f"{'healthy' if ok else 'unhealthy'}: {message}")
    return 0 if ok else 1


def service_demo(device: str | None) -> int:
    from gym_client import KernelGymClient
    from kernelgym.stack import LocalStack
    from services.problems import bundled_kernel, bundled_problems

    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    device_class = "cpu" if device == "cpu" else "gpu"
    problems = bundled_problems()
    with LocalStack(device_class=device_class) as stack:
        print(f"starting Redis, the gateway and a {device_class} worker (logs in {stack.dir}) ...", flush=True)
        stack.start_redis()
        stack.start_gateway()
        stack.start_worker()
        stack.wait_ready()
        print(f"gateway at {stack.base_url}; posting {len(problems.ids())} bundled examples", flush=True)
        with KernelGymClient(stack.base_url, timeout=60) as gym:
            items = [gym.submission(bundled_kernel(i).read_text(), problem_id=i) for i in problems.ids()]
            for evaluation in gym.evaluate_batch(items):
                done = gym.wait(evaluation.id, timeout=600)
                speedup = f"  speedup {done.speedup:.3f}x" if done.speedup else ""
                print(f"{done.result['problem'] if done.result else done.id}: {done.verdict or done.status}{speedup}")
    return 0


def _service_command(args: argparse.Namespace, settings: ServiceSettings) -> int:
    if args.command == "serve":
        from gym_api.serve import UnsafeConfiguration, serve

        try:
            serve(settings)
        except UnsafeConfiguration as exc:
            print(f"kernelgym serve: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.command == "worker":
        from gym_common.settings import load_settings
        from gym_worker.run import run_worker
        from services.settings import EvalSettings

        run_worker(settings, load_settings(EvalSettings), args.gpu, args.name)
        return 0
    return healthcheck(args, settings)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["eval"]:
        from services.cli import main as core_main

        return core_main(argv)
    args = _parser().parse_args(argv)
    if args.command == "demo":
        if args.in_process:
            from services.cli import main as core_main

            return core_main(["demo", *(["--device", args.device] if args.device else [])])
        return service_demo(args.device)
    if args.command in ("serve", "worker", "healthcheck"):
        from gym_common.settings import ConfigurationError, ServiceSettings, load_settings

        # --device-class stands for KERNELGYM_DEVICE_CLASS, validated with the rest.
        device_class = args.device_class if args.command == "worker" else None
        try:
            return _service_command(args, load_settings(ServiceSettings, device_class=device_class))
        except ConfigurationError as exc:  # one line saying what is expected, not a traceback
            print(f"kernelgym {args.command}: {exc}", file=sys.stderr)
            return 2
    print(hashlib.sha256(args.key.encode()).hexdigest())
    return 0
