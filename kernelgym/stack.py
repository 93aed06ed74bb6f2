"""A whole KernelGym service on one machine: a private Redis from the system package on a free port, the
gateway and workers, each its own process. Used by `kernelgym demo` and by the test suite."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(*procs: subprocess.Popen | None, sig: int = signal.SIGTERM, grace: float = 10.0) -> None:
    """Signal process groups started with start_new_session=True, all at once, then kill what is left after one
    `grace` for them all: one after another, a stack's workers (each finishing its evaluations first) could take
    longer than whoever stops the stack waits before killing it (`bench/gpu_acceptance.sh`: 15 s), which would
    leave the rest running."""
    live = [proc for proc in procs if proc is not None and proc.poll() is None]
    for proc in live:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
    deadline = time.monotonic() + grace
    for proc in live:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


class LocalStack:
    def __init__(self, workdir: Path | None = None, device_class: str = "cpu", env: dict[str, str] | None = None):
        self.own_dir = workdir is None
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="kernelgym-stack-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.device_class = device_class
        self.extra_env = env or {}
        self.redis_port = free_port()
        self.gateway_port = free_port()
        self.redis_proc: subprocess.Popen | None = None
        self.gateway_proc: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}"

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "KERNELGYM_REDIS_URL": self.redis_url,
                "KERNELGYM_HOST": "127.0.0.1",
                "KERNELGYM_PORT": str(self.gateway_port),
                "KERNELGYM_DEFAULT_DEVICE_CLASS": self.device_class,
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self.extra_env)
        env.update(extra)
        return env

    def _spawn(self, args: list[str], log_name: str, env: dict[str, str]) -> subprocess.Popen:
        log = open(self.dir / log_name, "ab")  # noqa: SIM115 (the process owns it for its lifetime)
        try:
            return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        finally:
            log.close()

    # -- Redis ----------------------------------------------------------------------------------------
    def start_redis(self, timeout: float = 20.0) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not installed (e.g. `apt-get install redis-server`)")
        data = self.dir / "redis"
        data.mkdir(exist_ok=True)
        args = [exe, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--dir", str(data)]
        args += ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
        self.redis_proc = self._spawn(args, "redis.log", dict(os.environ))
        client = redis.Redis.from_url(self.redis_url)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if self.redis_proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start:\n{self._tail('redis.log')}") from None
                time.sleep(0.05)

    def stop_redis(self, sig: int = signal.SIGTERM) -> None:
        stop(self.redis_proc, sig=sig)

    # -- gateway and workers -------------------------------------------------------------------------
    def start_gateway(self, timeout: float = 60.0, attempts: int = 3, **env: str) -> None:
        """The gateway, healthy. Another process can take the free port between `free_port` and the gateway's bind
        (tests start many stacks at once): the gateway then exits at once, and starts again on a fresh port."""
        env.setdefault("KERNELGYM_DEV_MODE", "true")
        args = [sys.executable, "-m", "kernelgym", "serve"]
        log = self.dir / "gateway.log"
        for attempt in range(1, attempts + 1):
            start = log.stat().st_size if log.exists() else 0
            self.gateway_proc = self._spawn(args, "gateway.log", self.env(**env))
            deadline = time.monotonic() + timeout
            while self.gateway_proc.poll() is None and time.monotonic() < deadline:
                try:
                    # Alive and answering: a 200 from whatever else holds the port does not count.
                    healthy = httpx.get(self.base_url + "/healthz", timeout=2).status_code == 200
                    if healthy and self.gateway_proc.poll() is None:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
            with open(log, "rb") as f:
                f.seek(start)
                taken = b"address already in use" in f.read()
            if not (taken and attempt < attempts):
                raise RuntimeError(f"the gateway did not start:\n{self._tail('gateway.log')}")
            self.gateway_port = free_port()

    def start_worker(self, gpu: int | None = None, **env: str) -> subprocess.Popen:
        n = len(self.workers)
        args = [sys.executable, "-m", "kernelgym", "worker", "--device-class", self.device_class]
        args += ["--name", f"w{n}-{self.device_class}@local"]
        if gpu is not None:
            args += ["--gpu", str(gpu)]
        proc = self._spawn(args, f"worker{n}.log", self.env(**env))
        self.workers.append(proc)
        return proc

    def wait_ready(self, workers: int = 1, timeout: float = 120.0) -> None:
        """Until `workers` pool processes have a heartbeat in Redis (they then have warm evaluation children)."""
        client = redis.Redis.from_url(self.redis_url)
        deadline = time.monotonic() + timeout
        while len(list(client.scan_iter(match="*:worker:*"))) < workers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{workers} worker(s) did not come up; the ends of their logs:\n{self._said()}")
            if all(w.poll() is not None for w in self.workers):
                raise RuntimeError(f"every worker exited; the ends of their logs:\n{self._said()}")
            time.sleep(0.2)

    def _tail(self, log_name: str, lines: int = 10) -> str:
        """The end of a log, for an error: the stack's directory, and its logs, go with the stack (`close`)."""
        try:
            return "\n".join((self.dir / log_name).read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(unreadable: {exc})"

    def _said(self) -> str:
        """The end of every worker's log."""
        return "\n".join(f"worker{n}.log:\n{self._tail(f'worker{n}.log')}" for n in range(len(self.workers)))

    def close(self) -> None:
        stop(*self.workers, self.gateway_proc)  # Redis last: a worker stores the results it finishes
        self.stop_redis()
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> LocalStack:
        # Its processes run in sessions of their own, so a signal to this one's group does not reach them: a SIGTERM
        # (`timeout`, `kill`) unwinds through __exit__ instead of leaving them running, holding ports and GPUs.
        self._sigterm = None
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self._sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        finally:
            if self._sigterm is not None:
                signal.signal(signal.SIGTERM, self._sigterm)
