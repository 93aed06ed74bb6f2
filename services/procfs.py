"""Processes as /proc shows them, for finding what a child started: by parent links, which `setsid` never
changes; and what /proc shows of this process to others. Standard library only: the zygote
(services.child.zygote) reads it before any user code runs."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections.abc import Iterator

# Passes of kill_tree over a process's descendants: each kills every one found; a fork bomb needs a few.
_KILL_PASSES = 16
# The kernel marks every thread of a dying process PF_EXITING (flags, field 9 of its stat) before the process's
# descriptors close, so whoever reads EOF from one of them can already tell it died.
_PF_EXITING = 0x4
_ENDED = (b"Z", b"X")  # states of /proc/<pid>/stat: a zombie, dead
PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4


def undumpable() -> None:
    """Hide this process from the other processes of its user: none without CAP_SYS_PTRACE may then read its
    memory, environment or mappings (/proc/<pid>/mem, environ, maps) or attach to it. The evaluator's process holds
    what a candidate must not see (the nonce its inputs' seeds come from, the reference's outputs, other
    submissions), the worker's the broker's password, one child another's tensors; a Landlock domain or a user
    namespace of the child's own also keeps a child out, but a host may offer neither (Docker's default seccomp
    profile refuses the namespace), and a child of the same user could then read them all."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def processes() -> Iterator[tuple[int, int, bytes]]:
    """(pid, parent pid, state) of every process, from fields 1, 4 and 3 of /proc/<pid>/stat; one that ends while
    it is read is left out."""
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))) is not None:
            yield int(entry), int(fields[1]), fields[0]


def _stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat from the third (the state) on, after the command's name, whatever that
    holds; None where there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def trees(roots: set[int]) -> dict[int, list[int]]:
    """Each root in `roots` with every live descendant it has (zombies left out: they run nothing), in one pass
    over /proc (a pass reads every process's stat, milliseconds on a busy host). Descendants by parent links, not
    by session: a process that calls `setsid` leaves its session, never its ancestry, and a child is a subreaper
    (services.child.boot), so an orphan stays below it."""
    children: dict[int, list[int]] = {}
    live: set[int] = set()
    for pid, parent, state in processes():
        children.setdefault(parent, []).append(pid)
        if state != b"Z":
            live.add(pid)
    found: dict[int, list[int]] = {}
    for root in roots:
        tree, todo = [root], list(children.get(root, ()))
        while todo:
            pid = todo.pop()
            if pid in live:
                tree.append(pid)
            todo.extend(children.get(pid, ()))
        found[root] = tree
    return found


def flock_holders() -> dict[int, set[tuple[int, int, int]]]:
    """Per process, the files it holds a `flock` lock on, as (major, minor, inode), from /proc/locks: the process
    that took each lock (waiters and POSIX locks, which never block a `flock`, left out)."""
    held: dict[int, set[tuple[int, int, int]]] = {}
    try:
        with open("/proc/locks", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return held
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] != b"FLOCK":  # "N: -> FLOCK ..." is a waiter
            continue
        with contextlib.suppress(ValueError):
            major, minor, inode = fields[5].split(b":")
            held.setdefault(int(fields[4]), set()).add((int(major, 16), int(minor, 16), int(inode)))
    return held


def file_id(path: str) -> tuple[int, int, int]:
    """A file's (major, minor, inode), as /proc/locks names it."""
    st = os.stat(path)
    return os.major(st.st_dev), os.minor(st.st_dev), st.st_ino


def tree(pid: int) -> list[int]:
    """`pid` and its live descendants."""
    return trees({pid})[pid]


def kill_tree(pid: int) -> None:
    """Kill `pid` and every process below it: stopped first, so that it forks nothing more and, a subreaper, keeps
    the orphans of the descendants killed below it; then its descendants, again until none is left; then it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGSTOP)
    for _ in range(_KILL_PASSES):
        below = tree(pid)[1:]
        if not below:
            break
        for p in below:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def gone(pid: int) -> bool:
    """Exited: no such process, or a zombie (a container's init may never reap an orphan)."""
    return _ended(_stat(pid))


def dying(pid: int) -> bool:
    """Gone, or exiting."""
    fields = _stat(pid)
    return _ended(fields) or int(fields[6]) & _PF_EXITING != 0


def _ended(fields: list[bytes] | None) -> bool:
    return fields is None or fields[0] in _ENDED
