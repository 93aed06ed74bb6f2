"""The zygote: a trusted process that has imported what every child needs and forks children on request.

A child started as a command spends about 3 s of CPU before it is ready (torch, torch._dynamo, Triton, the hash of
Triton's build), and an evaluation uses two or three children: at the tens of evaluations a minute a GPU worker
runs, those starts alone kept most of a 16-core host busy. The zygote does that work once; a child forked from it
is ready after its own share (the network's isolation, its limits, its CUDA context), which only a child can do.

It never initialises CUDA (a forked CUDA context is unusable) and never runs user code: it receives spawn requests
from the one parent process that started it, over a socket pair, and answers each with the new child's pid; it reaps
its children and reports each exit status, in `subprocess.Popen.returncode`'s convention, so the parent can tell a
crash from a kill. It is a subreaper, and kills whatever a child left behind that comes to it (`_kill_strays`). It
exits when the parent's end of the socket closes. Its children outlive it where the parent only dropped it (they are
still the parent's to end), and die with it where the parent died: no one is left to end them, and a candidate that
spins on a GPU would hold it until the host restarts.

Started as `python -m services.child.zygote SOCK_FD`, in the children's sanitised environment
(services.sandbox.child_env). Each forked child leads a new session, runs in its own directory with its own
environment, stdout and stderr, keeps no descriptor but those, stdin and its two channel ends, and then does what
`python -m services.child` does (services.child.boot.start).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import sys
import tempfile
import traceback
from typing import Any

from services import procfs

MAX_REQUEST_BYTES = 1 << 16
# A spawn request carries four descriptors: the child's ends of its two channel pipes, its stdout and its stderr.
REQUEST_FDS = 4


def _keep_only(fds: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in fds:
            with contextlib.suppress(OSError):  # the listing's own descriptor, already closed
                os.close(fd)


def _become_child(request: dict[str, Any], fds: list[int], sock: socket.socket) -> None:
    """In the forked process: take the child's identity, then run as a child. Never returns."""
    code = 1
    try:
        os.setsid()
        # The zygote's only change to the signal dispositions an interpreter starts with: the child's are then
        # those of a child started as a command (SIGPIPE and SIGXFSZ ignored, SIGINT raising KeyboardInterrupt).
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        to_child_r, from_child_w, out, err = fds
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        sock.close()
        _keep_only({0, 1, 2, to_child_r, from_child_w})
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # TMPDIR is the child's directory now
        from services.child.boot import start

        start(to_child_r, from_child_w, request["device"], int(request["mem_mb"]), int(request["file_mb"]))
        code = 0
    except SystemExit as exc:  # as the interpreter would exit with it
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _spawn(request: dict[str, Any], fds: list[int], sock: socket.socket) -> int:
    pid = os.fork()
    if pid == 0:
        _become_child(request, fds, sock)
    return pid


def _reap(sock: socket.socket, forked: set[int]) -> None:
    """Report the exits of the children it forked; reap and kill anything else that became its child."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if pid in forked:
            forked.discard(pid)
            # As `subprocess.Popen.returncode`: the exit code, or minus the signal that ended the child.
            sock.send(json.dumps({"op": "exit", "pid": pid, "code": os.waitstatus_to_exitcode(status)}).encode())
    _kill_strays(forked)


def _kill_strays(forked: set[int]) -> None:
    """The zygote is a subreaper: the orphaned descendants of a child that died are reparented to it. It forked
    none of them, so they are what a child's code left behind (a `setsid` grandchild of a child that exited):
    killed. Their own children come to it in turn, and go the same way when it reaps them."""
    me = os.getpid()
    for pid, parent, _ in procfs.processes():
        if parent == me and pid not in forked:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def serve(sock: socket.socket, parent: int) -> None:
    """Answer spawn requests and report exits until the parent (`parent`, its pid) closes its end."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the select below through the wakeup descriptor
    forked: set[int] = set()
    while True:
        readable, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
        _reap(sock, forked)
        if sock not in readable:
            continue
        message, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST_BYTES, REQUEST_FDS)
        if not message:  # the parent dropped this zygote, or died
            if os.getppid() != parent or procfs.dying(parent):
                for pid in forked:
                    procfs.kill_tree(pid)
            return
        request: Any = None
        try:
            request = json.loads(message)
            if len(fds) != REQUEST_FDS:
                raise ValueError(f"a spawn request needs {REQUEST_FDS} descriptors, got {len(fds)}")
            pid = _spawn(request, fds, sock)
            forked.add(pid)
            reply = {"op": "spawned", "id": request["id"], "pid": pid}
        except Exception as exc:  # a bad request or a failed fork: the parent's error, not the end of the zygote
            reply = {"op": "error", "id": request.get("id") if isinstance(request, dict) else None, "error": repr(exc)}
        finally:
            for fd in fds:
                os.close(fd)
        sock.send(json.dumps(reply).encode())


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    PR_SET_CHILD_SUBREAPER = 36
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # see _kill_strays
    from services.child.boot import import_harness, warm_triton_host

    import_harness()
    warm_triton_host()
    sock.send(json.dumps({"op": "ready", "pid": os.getpid()}).encode())
    serve(sock, os.getppid())


if __name__ == "__main__":
    main()
