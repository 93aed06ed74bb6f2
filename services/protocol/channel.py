"""Framed messages between the trusted parent and a child, over a private pipe pair.

A frame is a 4-byte big-endian header length, a JSON header, then the binary payloads the header
declares. JSON plus raw bytes, never pickle: the parent must be able to parse anything a hostile
child sends without running its code. Sizes are bounded before anything is read into memory.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from services.errors import ProtocolError

MAX_HEADER_BYTES = 1 << 20
MAX_PAYLOAD_BYTES = 1 << 31


class ChannelClosed(Exception):
    """The other end closed the pipe (usually: the child died)."""


class ChannelTimeout(Exception):
    """No complete message arrived before the deadline."""


@dataclass
class Deadline:
    """A deadline that may move later: when `at` passes, `extend()` says until when the wait is still allowed
    (e.g. while the child is compiling, within an allowance). Read only once `at` has passed, so the common
    path costs nothing."""

    at: float
    extend: Callable[[], float]

    def remaining(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            self.at = max(self.at, self.extend())
            left = self.at - time.monotonic()
        return left


def send(fd: int, header: dict[str, Any], payloads: list[bytes] | None = None) -> None:
    payloads = payloads or []
    header = {**header, "payload_sizes": [len(p) for p in payloads]}
    raw = json.dumps(header, separators=(",", ":")).encode()
    _write_all(fd, struct.pack(">I", len(raw)) + raw)
    for p in payloads:
        _write_all(fd, p)


def recv(fd: int, deadline: float | Deadline | None = None) -> tuple[dict[str, Any], list[bytes]]:
    """Read one message; `deadline` is a `time.monotonic()` value or a Deadline, `None` waits forever."""
    (size,) = struct.unpack(">I", _read_exact(fd, 4, deadline))
    if size > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {size} bytes exceeds the {MAX_HEADER_BYTES} limit")
    try:
        header = json.loads(_read_exact(fd, size, deadline))
    except ValueError as exc:
        raise ProtocolError(f"header is not JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    sizes = header.get("payload_sizes", [])
    if not isinstance(sizes, list) or not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise ProtocolError("bad payload_sizes")
    if sum(sizes) > MAX_PAYLOAD_BYTES:
        raise ProtocolError("payloads exceed the size limit")
    return header, [_read_exact(fd, s, deadline) for s in sizes]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _wait_readable(fd: int, deadline: float | Deadline) -> None:
    """Until `fd` has data, or ChannelTimeout once the deadline (as it may have moved meanwhile) has passed."""
    while True:
        wait = deadline.remaining() if isinstance(deadline, Deadline) else deadline - time.monotonic()
        if wait <= 0:
            raise ChannelTimeout()
        if select.select([fd], [], [], wait)[0]:
            return


def _read_exact(fd: int, n: int, deadline: float | Deadline | None) -> bytes:
    chunks: list[bytes] = []
    remaining = n
    while remaining:
        if deadline is not None:
            _wait_readable(fd, deadline)
        chunk = os.read(fd, min(remaining, 1 << 24))
        if not chunk:
            raise ChannelClosed()
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
