"""A root worker's child gives up its capabilities after the trusted warm-up (services.child.boot), checked in a
fresh interpreter as root: every set empty, and where it may not empty the bounding set, the others still are."""

import os

import pytest
from helpers import run_fresh_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only a root process holds capabilities to drop")

_DROP = """
    import ctypes
    from services.child.boot import _drop_capabilities
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(38, 1, 0, 0, 0)  # no_new_privs, as the child's seccomp filters set it before
    {before}
    print(_drop_capabilities().replace(" ", "_"))
    with open("/proc/self/status") as f:
        print(*(line.split()[1] for line in f if line.startswith(("CapEff", "CapPrm", "CapInh", "CapBnd"))))
"""


def _run(before: str = "") -> list[str]:
    return run_fresh_python(_DROP.format(before=before))


def test_a_root_child_empties_every_capability_set():
    report, *sets = _run()
    assert report == "dropped"
    assert [int(s, 16) for s in sets] == [0, 0, 0, 0]  # inheritable, permitted, effective, bounding


def test_a_root_child_that_may_not_empty_its_bounding_set_still_holds_no_capability():
    # Without CAP_SETPCAP (a container that dropped it), the bounding set stays; the others empty all the same.
    without_setpcap = (
        "h = (ctypes.c_uint32 * 2)(0x20080522, 0); d = (ctypes.c_uint32 * 6)(); libc.capget(h, d); "
        "d[0] &= ~(1 << 8); d[1] &= ~(1 << 8); libc.capset(h, d)"
    )
    report, inheritable, permitted, effective, bounding = _run(without_setpcap)
    assert report == "dropped_(bounding_set_kept:_EPERM)"
    assert [int(inheritable, 16), int(permitted, 16), int(effective, 16)] == [0, 0, 0]
    assert int(bounding, 16) != 0
