"""`kernelgym worker`: one Celery worker serving one device, with several evaluations in flight (one prefork
pool process each); their timing stages take turns in the device's timing slot (services.device_lock)."""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from gym_common.settings import ServiceSettings
from services import procfs
from services.settings import EvalSettings

log = logging.getLogger("kernelgym.worker")

# Cores per evaluation in flight: the candidate child compiling, the parent and the reference child comparing,
# warm children starting in the background. On 16 cores of an H200 host 4 in flight gave the most evaluations a
# minute and 6 or 8 fewer (docs/benchmarks.md); the GPU, not the host, now bounds the default (2 in flight,
# gym_common/settings.py), and this bound matters on hosts of fewer cores.
CORES_PER_EVALUATION = 4
# URL schemes of a Redis reached over a Unix socket (redis-py's, and Kombu's for Celery).
UNIX_SOCKET_SCHEMES = ("unix", "redis+socket", "socket")


def gpu_memory_mb(gpu: int | None) -> int | None:
    """Total memory of the GPU, from nvidia-smi (no CUDA in this process: Celery forks it); None if unknown."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", str(gpu or 0)],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        return int(out.split()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def device_id(device: str) -> str:
    """What every process on the host calls this device: the GPU's UUID, the same whatever
    CUDA_VISIBLE_DEVICES maps it to, read in a subprocess (CUDA must not start in a process Celery forks)."""
    if device == "cpu":
        return "cpu"
    probe = "import torch; print(torch.cuda.get_device_properties(0).uuid)"
    try:
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
        ).stdout
        return f"gpu-{out.split()[-1]}"
    except (OSError, subprocess.SubprocessError, IndexError) as exc:
        fallback = f"gpu-{os.environ.get('CUDA_VISIBLE_DEVICES', '0')}"
        log.warning("GPU UUID unknown (%s); the device is named %s", exc, fallback)
        return fallback


def concurrency(settings: ServiceSettings, device: str, gpu: int | None) -> int:
    """Evaluations in flight: KERNELGYM_WORKER_CONCURRENCY when set, else its default lowered to what this
    host's cores (shared among its GPUs) and the GPU's memory allow."""
    if "worker_concurrency" in settings.model_fields_set:
        return settings.worker_concurrency
    gpus_on_host = len(list(Path("/proc/driver/nvidia/gpus").glob("*"))) if device == "cuda" else 0
    cores = len(os.sched_getaffinity(0)) // max(1, gpus_on_host)
    n = min(settings.worker_concurrency, max(1, cores // CORES_PER_EVALUATION))
    memory = gpu_memory_mb(gpu) if device == "cuda" else None
    if memory is not None:
        n = min(n, max(1, memory // settings.worker_gpu_memory_mb))
    log.info("%d evaluation(s) in flight: %d core(s) for this device, GPU memory %s MB", n, cores, memory)
    return n


def refuse_unix_socket_broker(redis_url: str) -> None:
    """A worker's Redis must be one its evaluations' children cannot open. A child may open Unix sockets (its
    socket filter, services.child.seccomp, keeps it off the network only), and where no user namespace or
    Landlock domain keeps it out, its native code can read the password from the environment of PID 1
    (docs/security.md): with both, it could rewrite any evaluation's result."""
    scheme = urlsplit(redis_url).scheme.lower()
    if scheme in UNIX_SOCKET_SCHEMES:
        raise SystemExit(
            f"KERNELGYM_REDIS_URL reaches Redis over a Unix socket ({scheme}://), which an evaluation's child may "
            "open too: give workers Redis over TCP (a child may open no socket but a Unix or netlink one)"
        )


def claim_device(lock_dir: str, device_id: str, wait_s: float = 30.0) -> int:
    """One worker per GPU: hold `<device_id>.worker` in the shared lock directory for this worker's life (the
    returned descriptor, left open). A worker sizes its evaluations in flight, and their warm
    children, for a GPU of its own: on an H100 host, two workers per GPU ran every child past its 120 s start
    limit and failed every evaluation. Waits up to `wait_s` for a worker that is still exiting."""
    os.makedirs(lock_dir, exist_ok=True)
    fd = os.open(os.path.join(lock_dir, f"{device_id}.worker"), os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise SystemExit(
                    f"another worker (pid {holder}) already serves {device_id}: run one worker per GPU; it keeps "
                    "several evaluations in flight (KERNELGYM_WORKER_CONCURRENCY)"
                ) from None
            time.sleep(0.5)
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def run_worker(settings: ServiceSettings, evaluation: EvalSettings, gpu: int | None, name: str | None) -> None:
    """Serve one device with the settings `kernelgym worker` loaded (the device class of its option already in
    them); the pool processes, forked from this one, build their state from the same objects."""
    refuse_unix_socket_broker(settings.redis_url)
    # The environment of this process and of what it starts, set before anything imports torch or Triton: the
    # GPU they see, and the Triton interpreter where evaluations run on the CPU.
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    if settings.device_class == "cpu" or settings.worker_device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    # The broker's password in this process's environment and the jobs it receives: no child of the user reads
    # them here, nor in the pool processes, which inherit this.
    procfs.undumpable()
    from gym_common.jobs import Keys
    from gym_common.logs import configure_json_logging

    configure_json_logging(settings.log_level)
    device = settings.evaluation_device()
    named = settings.worker_device_id or device_id(device)
    settings = settings.model_copy(update={"worker_device_id": named})
    if device == "cuda":  # CPU workers share the host's cores as the OS schedules them
        claim_device(settings.gpu_lock_dir, named)
    from gym_worker.tasks import worker_app

    in_flight = concurrency(settings, device, gpu)
    # The children's default host-memory limit shares the host among the children that run at once: an
    # evaluation's reference and candidate, and on a GPU, while a reference is timed in several processes, one
    # more reference child, and with KERNELGYM_PRECOMPILE its compiler child.
    on_gpu = int(evaluation.reference_processes > 1) + int(evaluation.precompile)
    per_evaluation = 2 + (on_gpu if device == "cuda" else 0)
    app = worker_app(settings, evaluation.for_pool(in_flight, per_evaluation))
    device_class = settings.device_class
    node = name or f"{device_class}{'' if gpu is None else f'-gpu{gpu}'}-{os.getpid()}@{socket.gethostname()}"
    app.worker_main(
        [
            "worker",
            "--pool=prefork",
            f"--concurrency={in_flight}",
            f"--queues={','.join(Keys(settings.key_prefix).queues(device_class))}",
            f"--hostname={node}",
            f"--loglevel={settings.log_level}",
            "--without-gossip",
            "--without-mingle",
        ]
    )
