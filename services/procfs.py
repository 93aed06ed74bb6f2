"""Processes as /proc shows them, for finding what a child started: by parent links, which `setsid` never
changes. Standard library only: the zygote (services.child.zygote) reads it before any user code runs."""

from __future__ import annotations

import os
from collections.abc import Iterator


def processes() -> Iterator[tuple[int, int, bytes]]:
    """(pid, parent pid, state) of every process, from fields 1, 4 and 3 of /proc/<pid>/stat; one that ends while
    it is read is left out."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        yield int(entry), int(fields[1]), fields[0]
