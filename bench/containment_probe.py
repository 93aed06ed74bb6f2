"""What process containment a host allows a worker's children (docs/security.md, Processes a child starts): a PID
namespace as this user or in a user namespace, a subreaper, a seccomp filter, a writable cgroup v2. Prints JSON.

    python3 bench/containment_probe.py                                   # as the worker's user
    setpriv --reuid=65534 --regid=65534 --clear-groups python3 bench/containment_probe.py   # unprivileged
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import sys

_LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWPID = 0x10000000, 0x20000000


def _in_fork(step: object) -> str:
    """Run `step` (returns 0 or an errno) in a forked process, so that nothing here changes; "ok" or the error."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = step()  # type: ignore[operator]
        finally:
            os._exit(code)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return "ok" if code == 0 else errno.errorcode.get(code, str(code))


def pid_namespace(flags: int) -> str:
    """Whether unshare(`flags`) works and the next child is pid 1 of the new namespace."""

    def step() -> int:
        if _LIBC.unshare(flags) != 0:
            return ctypes.get_errno()
        child = os.fork()
        if child == 0:
            os._exit(0 if os.getpid() == 1 else errno.EINVAL)
        return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])

    return _in_fork(step)


def seccomp() -> str:
    """Whether an unprivileged process may install a seccomp filter (one that allows everything)."""

    def step() -> int:
        allow = (0x06).to_bytes(2, "little") + bytes(2) + (0x7FFF0000).to_bytes(4, "little")
        buf = ctypes.create_string_buffer(allow, len(allow))

        class Program(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        prog = Program(1, ctypes.addressof(buf))
        if _LIBC.prctl(38, 1, 0, 0, 0) != 0 or _LIBC.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:
            return ctypes.get_errno()
        return 0

    return _in_fork(step)


def cgroup2() -> str:
    """Whether a child cgroup can be made below this process's cgroup v2, and whether it has cgroup.kill."""
    with open("/proc/self/mounts") as f:
        mounts = [line.split()[1] for line in f if line.split()[2] == "cgroup2"]
    with open("/proc/self/cgroup") as f:
        own = [line.strip().split(":", 2)[2] for line in f if line.startswith("0::")]
    if not mounts or not own:
        return "no cgroup v2"
    probe = os.path.join(mounts[0], own[0].lstrip("/"), "kernelgym-probe")
    try:
        os.mkdir(probe)
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, repr(exc))
    killable = os.path.exists(os.path.join(probe, "cgroup.kill"))
    os.rmdir(probe)
    return "ok, cgroup.kill" if killable else "ok, no cgroup.kill"


def main() -> None:
    report = {
        "uid": os.getuid(),
        "kernel": os.uname().release,
        "machine": os.uname().machine,
        "python": sys.version.split()[0],
        "pid_namespace": pid_namespace(CLONE_NEWPID),
        "user_and_pid_namespace": pid_namespace(CLONE_NEWUSER | CLONE_NEWPID),
        "subreaper": _in_fork(lambda: 0 if _LIBC.prctl(36, 1, 0, 0, 0) == 0 else ctypes.get_errno()),
        "seccomp": seccomp(),
        "cgroup2": cgroup2(),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
