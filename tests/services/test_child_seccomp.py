"""The seccomp filters a child installs (services.child.seccomp), each checked in a fresh interpreter, as a filter
is kept for life: what they refuse to native code, and what they leave a child."""

import os
import socket
import subprocess
import sys

import pytest
from helpers import run_fresh_python

pytestmark = pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="no filter for this arch")


def test_a_child_with_the_socket_filter_opens_no_ip_socket_and_reaches_no_listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        out = run_fresh_python(f"""
            import ctypes, errno, socket
            from services.child.seccomp import refuse_sockets
            print(refuse_sockets().replace(" ", "_"))
            libc = ctypes.CDLL(None, use_errno=True)
            for family in (socket.AF_INET, socket.AF_INET6, socket.AF_PACKET):
                fd = libc.socket(family, socket.SOCK_STREAM, 0)  # native code, past any audit hook
                print(errno.errorcode.get(ctypes.get_errno()) if fd < 0 else "opened")
            try:
                socket.create_connection(("127.0.0.1", {server.getsockname()[1]}), timeout=2).close()
                print("reached")
            except OSError as exc:
                print(errno.errorcode.get(exc.errno))
            print("io_uring", errno.errorcode.get(ctypes.get_errno()) if libc.syscall(425, 1, None) < 0 else "set up")
            a, b = socket.socketpair()  # local sockets stay: Unix and netlink
            a.sendall(b"x")
            print(b.recv(1).decode(), socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).family.name)
        """)
    finally:
        server.close()
    if out[0] != "local_sockets_only":
        pytest.skip(f"no seccomp here: {out[0]}")
    assert out[1:] == ["EAFNOSUPPORT"] * 4 + ["io_uring", "EPERM", "x", "AF_NETLINK"]


def test_a_child_with_the_signal_filter_signals_and_traces_nothing_but_itself():
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        out = run_fresh_python(f"""
            import ctypes, errno, os, signal
            from services.child.seccomp import confine_signals
            print(confine_signals())
            libc = ctypes.CDLL(None, use_errno=True)
            def refused(result):
                return errno.errorcode.get(ctypes.get_errno()) if result < 0 else "done"
            print(refused(libc.kill({other.pid}, signal.SIGKILL)))
            print(refused(libc.syscall(101, 16, {other.pid}, 0, 0)))  # ptrace(PTRACE_ATTACH)
            print(refused(libc.kill(os.getpid(), 0)))
        """)
        alive = other.poll() is None
    finally:
        other.kill()
        other.wait()
    if out[0] != "seccomp":
        pytest.skip(f"no seccomp here: {out[0]}")
    assert out[1:] == ["EPERM", "EPERM", "done"]
    assert alive
