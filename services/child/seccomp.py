"""Seccomp filters a child installs on itself. Each is kept for life by the child and everything it starts, and
native code (ctypes, an extension) cannot get past one: the audit hook (services.child.guards) sees only Python.
Where seccomp is unavailable, the audit hook alone stands and the child's report says so."""

from __future__ import annotations

import ctypes
import errno
import os
from dataclasses import dataclass

# What seccomp and Landlock both need: no privilege gained by exec (setuid), for this process and its descendants.
PR_SET_NO_NEW_PRIVS = 38


@dataclass(frozen=True)
class _Arch:
    audit: int
    kill: int
    tkill: int
    tgkill: int
    inspect: tuple[int, ...]  # ptrace, process_vm_readv, process_vm_writev, pidfd_send_signal
    socket: int
    x32: bool  # x86_64's x32 numbers (bit 30 set) are refused whole


_ARCHES = {
    "x86_64": _Arch(0xC000003E, 62, 200, 234, (101, 310, 311, 424), 41, True),
    "aarch64": _Arch(0xC00000B7, 129, 130, 131, (117, 270, 271, 424), 198, False),
}
_IO_URING_SETUP = 425  # the generic number, the same on both
_LOCAL_FAMILIES = (1, 16)  # AF_UNIX, AF_NETLINK: nothing beyond the host
_LD, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_ALLOW = 0x7FFF0000
_Row = tuple[int, str | int, str | int, int] | str


def _refuse(code: int) -> int:
    return 0x00050000 | code  # SECCOMP_RET_ERRNO


def _bpf(program: list[_Row]) -> bytes:
    """A classic BPF program from (code, jump-if-true, jump-if-false, k) rows and label strings; jumps name a
    label or are 0 (the next row)."""
    rows = [r for r in program if not isinstance(r, str)]
    at, n = {}, 0
    for r in program:
        if isinstance(r, str):
            at[r] = n
        else:
            n += 1
    out = b""
    for i, (code, jt, jf, k) in enumerate(rows):
        off = [at[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
        out += code.to_bytes(2, "little") + bytes(off) + (k & 0xFFFFFFFF).to_bytes(4, "little")
    return out


def _this_arch(arch: _Arch) -> list[_Row]:
    """Rows that refuse every call of another architecture, then load the call's number."""
    return [
        (_LD, 0, 0, 4),
        (_JEQ, 0, "deny", arch.audit),
        (_LD, 0, 0, 0),
        *([(_JGE, "deny", 0, 0x40000000)] if arch.x32 else []),
    ]


def _install(program: list[_Row], what: str) -> str:
    code = _bpf(program)
    libc = ctypes.CDLL(None, use_errno=True)
    filters = ctypes.create_string_buffer(code, len(code))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Program(len(code) // 8, ctypes.addressof(filters))
    PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"none (no_new_privs: {errno.errorcode.get(ctypes.get_errno(), '?')})"
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return f"none (seccomp: {errno.errorcode.get(ctypes.get_errno(), '?')})"
    return what


def confine_signals() -> str:
    """A signal only to itself (kill and tgkill on its own pid, its own process group, or 0), no tkill, ptrace,
    process_vm_readv/writev or pidfd_send_signal, each refused with EPERM: no request's code signals or inspects
    another evaluation's processes, the zygote or the worker."""
    arch = _ARCHES.get(os.uname().machine)
    if arch is None:
        return f"none (no filter for {os.uname().machine})"
    me = os.getpid()
    return _install(
        [
            *_this_arch(arch),
            (_JEQ, "own", 0, arch.kill),
            (_JEQ, "own_group", 0, arch.tgkill),
            (_JEQ, "deny", 0, arch.tkill),
            *[(_JEQ, "deny", 0, number) for number in arch.inspect],
            (_RET, 0, 0, _ALLOW),
            "own",
            (_LD, 0, 0, 16),  # the low half of the first argument: the pid
            (_JEQ, "allow", 0, 0),
            (_JEQ, "allow", 0, -me),
            "own_group",
            (_LD, 0, 0, 16),
            (_JEQ, "allow", "deny", me),
            "allow",
            (_RET, 0, 0, _ALLOW),
            "deny",
            (_RET, 0, 0, _refuse(errno.EPERM)),
        ],
        "seccomp",
    )


def refuse_sockets() -> str:
    """No socket but a Unix or netlink one (others fail with EAFNOSUPPORT), and no io_uring (EPERM), whose
    operations would open sockets past seccomp. Where a child shares its worker's network (Docker's and
    Kubernetes' default seccomp profiles refuse it a namespace of its own), this is what keeps native code from
    reaching Redis, or anything else over the network, with what it can read of the worker (its environment
    holds the Redis URL). Installed after the trusted warm-up: nothing of a request has run before it."""
    arch = _ARCHES.get(os.uname().machine)
    if arch is None:
        return f"none (no filter for {os.uname().machine})"
    return _install(
        [
            *_this_arch(arch),
            (_JEQ, "deny", 0, _IO_URING_SETUP),
            (_JEQ, "socket", 0, arch.socket),
            (_RET, 0, 0, _ALLOW),
            "socket",
            (_LD, 0, 0, 16),  # the low half of the first argument: the address family
            *[(_JEQ, "allow", 0, family) for family in _LOCAL_FAMILIES],
            (_RET, 0, 0, _refuse(errno.EAFNOSUPPORT)),
            "allow",
            (_RET, 0, 0, _ALLOW),
            "deny",
            (_RET, 0, 0, _refuse(errno.EPERM)),
        ],
        "local sockets only",
    )
