"""The parent's end of the zygote (services.child.zygote): children forked from a process that has done their
imports, instead of each started as a fresh interpreter.

One zygote per process that starts children and per Triton mode (a CPU child's Triton is the interpreter, chosen
as Triton's own modules are imported, so those children come from a zygote started in that mode), started on its
first spawn and again if it has died; a forked process (a Celery pool process) starts its own. A child forked by it
is a `ForkedProcess`, which answers what the sandbox asks of a `subprocess.Popen` (pid, poll, wait): its exit status
comes from the zygote, which is its parent. Should the zygote die, the exit statuses of its children still running
are lost; such a child counts as killed once it is gone, which is what the sandbox's close does to every child
anyway.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from services import procfs
from services.child.zygote import MAX_REQUEST_BYTES

_START_TIMEOUT_S = 120.0  # importing torch on a loaded host; a child's own start limit then applies on top
_POLL_LOCK_S = 0.2  # how long asking for an exit status waits for the lock before answering "not yet"


class ZygoteUnavailable(Exception):
    """The zygote could not be started or reached; the caller starts the child as a command instead."""


def start_module(
    module: str, args: list[str], fds: tuple[int, ...], env: dict[str, str], cwd: str, out: Any, err: Any
) -> subprocess.Popen:
    """`python -m MODULE ARGS` in a session of its own (so it can be killed whole), stdin closed, keeping only
    `fds` of this process's descriptors: how a child started as a command and the zygote are started. `-P`: the
    directory it starts in (a child's own, the zygote's) is not searched for modules, so that no file planted there
    by a candidate (same user) is imported by a later child or a kept reference child's next job."""
    return subprocess.Popen(
        [sys.executable, "-P", "-m", module, *args],
        pass_fds=fds,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=err,
        start_new_session=True,
    )


class ForkedProcess:
    """A child forked by the zygote, as far as its parent needs to follow it."""

    def __init__(self, zygote: Zygote, pid: int):
        self.zygote = zygote
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.returncode(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        until = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if until is not None and time.monotonic() > until:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            time.sleep(0.01)
        return code


class Zygote:
    """One zygote process, started on demand, and what it has said about the children it forked. Thread-safe: the
    pool's refill thread spawns while the supervisor and the evaluation poll."""

    def __init__(self) -> None:
        self._fresh()

    def _fresh(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._dir: str | None = None
        self._ids = itertools.count(1)
        self._codes: dict[int, int] = {}  # exit statuses reported and not yet asked for
        self._replies: dict[int, dict[str, Any]] = {}
        self._forked: set[int] = set()  # by the current zygote, still running as far as it has said
        self._orphans: set[int] = set()  # forked by a zygote that has since died: statuses lost

    def spawn(
        self, env: dict[str, str], device: str, cwd: str, limits: tuple[int, int], fds: list[int]
    ) -> ForkedProcess:
        """Fork a child that runs as `python -m services.child` would with the same arguments, in `cwd` with
        `env`; `fds`: its channel ends (read, write), stdout and stderr, which stay the caller's to close."""
        with self._lock:
            sock = self._ensure(env)
            rid = next(self._ids)
            request = {"id": rid, "device": device, "cwd": cwd, "env": env, "mem_mb": limits[0], "file_mb": limits[1]}
            try:
                socket.send_fds(sock, [json.dumps(request).encode()], fds)
                reply = self._await(rid, time.monotonic() + _START_TIMEOUT_S)
            except (OSError, ZygoteUnavailable) as exc:
                self._lost()
                raise ZygoteUnavailable(f"the zygote stopped answering: {exc!r}") from None
            if reply["op"] != "spawned":
                raise ZygoteUnavailable(f"the zygote could not fork: {reply.get('error')}")
            self._forked.add(int(reply["pid"]))
        return ForkedProcess(self, int(reply["pid"]))

    def returncode(self, pid: int) -> int | None:
        """The child's exit status once it has exited (asked once: the handle keeps it), else None. Also None
        while `spawn` holds the lock waiting for a fork or a new zygote (up to its start timeout): a caller that
        waits with a deadline polls again rather than sitting out that wait."""
        if not self._lock.acquire(timeout=_POLL_LOCK_S):
            return None
        try:
            if self._sock is not None:
                try:
                    self._drain()
                except (OSError, ZygoteUnavailable):
                    self._lost()
            if pid in self._codes:
                return self._codes.pop(pid)
            if pid in self._orphans and procfs.gone(pid):
                self._orphans.discard(pid)
                return -signal.SIGKILL
            return None
        finally:
            self._lock.release()

    # -- under the lock ----------------------------------------------------------------------------
    def _ensure(self, env: dict[str, str]) -> socket.socket:
        if self._sock is not None and self._proc is not None and self._proc.poll() is None:
            return self._sock
        self._lost()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._dir = tempfile.mkdtemp(prefix="kernelgym-zygote-")
        zygote_env = {**env, "HOME": self._dir, "TMPDIR": self._dir, "TRITON_CACHE_DIR": self._dir}
        zygote_env.pop("CUDA_VISIBLE_DEVICES", None)
        try:
            with open(os.path.join(self._dir, ".stderr"), "wb") as err:
                fd = theirs.fileno()
                self._proc = start_module("services.child.zygote", [str(fd)], (fd,), zygote_env, self._dir, err, err)
        finally:
            theirs.close()
        self._sock = ours
        try:
            hello = self._message(time.monotonic() + _START_TIMEOUT_S)
        except (OSError, ZygoteUnavailable) as exc:
            self._lost()
            raise ZygoteUnavailable(f"the zygote did not start: {exc!r}") from None
        if hello.get("op") != "ready":
            self._lost()
            raise ZygoteUnavailable(f"unexpected first message from the zygote: {hello!r:.200}")
        return ours

    def _await(self, rid: int, deadline: float) -> dict[str, Any]:
        while rid not in self._replies:
            self._store(self._message(deadline))
        return self._replies.pop(rid)

    def _drain(self) -> None:
        """Take in what the zygote has already sent (exit statuses, replies), without waiting."""
        while select.select([self._sock], [], [], 0)[0]:
            self._store(self._message(None))

    def _message(self, deadline: float | None) -> dict[str, Any]:
        assert self._sock is not None
        if deadline is not None and not select.select([self._sock], [], [], max(deadline - time.monotonic(), 0))[0]:
            raise ZygoteUnavailable("no answer in time")
        raw = self._sock.recv(MAX_REQUEST_BYTES)
        if not raw:
            raise ZygoteUnavailable("the zygote exited")
        return json.loads(raw)

    def _store(self, message: dict[str, Any]) -> None:
        if message.get("op") == "exit":
            self._forked.discard(int(message["pid"]))
            self._codes[int(message["pid"])] = int(message["code"])
        elif "id" in message:
            self._replies[int(message["id"])] = message

    def _lost(self) -> None:
        """Drop the current zygote (gone, or to be replaced): the children it forked become orphans."""
        if self._sock is not None:
            self._sock.close()  # the zygote exits on its end's EOF
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        self._replies.clear()
        self._orphans |= self._forked
        self._forked = set()

    def reset_after_fork(self) -> None:
        """In a forked process: the zygote and its children are the parent process's."""
        if self._sock is not None:
            self._sock.close()
        self._fresh()


_ZYGOTES = {"interpreter": Zygote(), "compiled": Zygote()}


def spawn_forked(env: dict[str, str], device: str, cwd: str, limits: tuple[int, int], fds: list[int]) -> ForkedProcess:
    """`Zygote.spawn` on the zygote of the child's Triton mode."""
    return _ZYGOTES["interpreter" if env.get("TRITON_INTERPRET") == "1" else "compiled"].spawn(
        env, device, cwd, limits, fds
    )


def _reset_after_fork() -> None:
    for zygote in _ZYGOTES.values():
        zygote.reset_after_fork()


os.register_at_fork(after_in_child=_reset_after_fork)
