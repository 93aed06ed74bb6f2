"""Framed messages over a real pipe: round trips, deadlines, EOF and malformed frames."""

from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
import time

import pytest

from services.errors import ProtocolError
from services.protocol.channel import (
    MAX_HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
    ChannelClosed,
    ChannelTimeout,
    recv,
    send,
)


@pytest.fixture
def pipe():
    r, w = os.pipe()
    fds = {"r": r, "w": w}
    yield fds
    for fd in fds.values():
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _close_writer(pipe) -> None:
    os.close(pipe["w"])
    pipe["w"] = None


def _raw_frame(header: bytes) -> bytes:
    return struct.pack(">I", len(header)) + header


def test_round_trip_header_only(pipe):
    send(pipe["w"], {"cmd": "ping", "n": 3})
    header, payloads = recv(pipe["r"], time.monotonic() + 5)
    assert header == {"cmd": "ping", "n": 3, "payload_sizes": []}
    assert payloads == []


def test_round_trip_with_payloads(pipe):
    blobs = [b"abc", b"", bytes(range(256))]
    send(pipe["w"], {"cmd": "output", "nested": {"a": [1, 2.5, None]}}, blobs)
    header, payloads = recv(pipe["r"], time.monotonic() + 5)
    assert header == {"cmd": "output", "nested": {"a": [1, 2.5, None]}, "payload_sizes": [3, 0, 256]}
    assert payloads == blobs


def test_wire_format_is_length_prefixed_json_then_raw_payloads(pipe):
    send(pipe["w"], {"k": 1}, [b"xy"])
    _close_writer(pipe)
    data = os.read(pipe["r"], 1 << 16)
    raw = b'{"k":1,"payload_sizes":[2]}'
    assert data == struct.pack(">I", len(raw)) + raw + b"xy"


def test_several_messages_are_read_in_order(pipe):
    for i in range(3):
        send(pipe["w"], {"i": i}, [bytes([i]) * i])
    got = [recv(pipe["r"], time.monotonic() + 5) for _ in range(3)]
    assert [h["i"] for h, _ in got] == [0, 1, 2]
    assert [p for _, p in got] == [[b""], [b"\x01"], [b"\x02\x02"]]


def test_round_trip_of_payload_larger_than_the_pipe_buffer(pipe):
    big = os.urandom(3 * 1024 * 1024 + 17)
    writer = threading.Thread(target=send, args=(pipe["w"], {"cmd": "big"}, [big, b"tail"]))
    writer.start()
    try:
        header, payloads = recv(pipe["r"], time.monotonic() + 30)
    finally:
        writer.join(timeout=30)
    assert header["payload_sizes"] == [len(big), 4]
    assert payloads[0] == big
    assert payloads[1] == b"tail"


def test_recv_without_deadline_waits_for_a_late_message(pipe):
    timer = threading.Timer(0.1, send, args=(pipe["w"], {"late": True}))
    timer.start()
    try:
        header, _ = recv(pipe["r"], None)
    finally:
        timer.join()
    assert header == {"late": True, "payload_sizes": []}


def test_timeout_when_nothing_arrives_before_the_deadline(pipe):
    start = time.monotonic()
    with pytest.raises(ChannelTimeout):
        recv(pipe["r"], start + 0.1)
    elapsed = time.monotonic() - start
    assert 0.09 <= elapsed < 1.0


def test_timeout_when_a_frame_is_only_partly_written(pipe):
    raw = b'{"payload_sizes":[10]}'
    os.write(pipe["w"], _raw_frame(raw) + b"12345")
    start = time.monotonic()
    with pytest.raises(ChannelTimeout):
        recv(pipe["r"], start + 0.1)
    assert time.monotonic() - start < 1.0


def test_closed_on_eof_before_any_byte(pipe):
    _close_writer(pipe)
    with pytest.raises(ChannelClosed):
        recv(pipe["r"], time.monotonic() + 5)


def test_closed_on_eof_in_the_middle_of_a_payload(pipe):
    os.write(pipe["w"], _raw_frame(b'{"payload_sizes":[10]}') + b"12345")
    _close_writer(pipe)
    with pytest.raises(ChannelClosed):
        recv(pipe["r"], time.monotonic() + 5)


def test_closed_on_eof_without_deadline(pipe):
    os.write(pipe["w"], b"\x00\x00")
    _close_writer(pipe)
    with pytest.raises(ChannelClosed):
        recv(pipe["r"], None)


def test_oversized_header_length_is_a_protocol_error_before_reading_it(pipe):
    os.write(pipe["w"], struct.pack(">I", MAX_HEADER_BYTES + 1))
    with pytest.raises(ProtocolError, match=f"header of {MAX_HEADER_BYTES + 1} bytes exceeds"):
        recv(pipe["r"], time.monotonic() + 5)


def test_header_length_at_the_limit_is_not_rejected_for_its_size(pipe):
    os.write(pipe["w"], struct.pack(">I", MAX_HEADER_BYTES))
    _close_writer(pipe)
    # Accepted as a size; the (absent) header then hits EOF.
    with pytest.raises(ChannelClosed):
        recv(pipe["r"], time.monotonic() + 5)


@pytest.mark.parametrize("raw", [b"not json", b"{'single': 'quotes'}", b"\xff\xfe\x00", b"{"])
def test_non_json_header_is_a_protocol_error(pipe, raw):
    os.write(pipe["w"], _raw_frame(raw))
    with pytest.raises(ProtocolError, match="header is not JSON"):
        recv(pipe["r"], time.monotonic() + 5)


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"text"', b"42", b"null"])
def test_non_object_json_header_is_a_protocol_error(pipe, raw):
    os.write(pipe["w"], _raw_frame(raw))
    with pytest.raises(ProtocolError, match="header is not a JSON object"):
        recv(pipe["r"], time.monotonic() + 5)


@pytest.mark.parametrize("sizes", [[-1], [1.5], ["3"], "3", {"a": 1}, [1, None]])
def test_bad_payload_sizes_are_a_protocol_error(pipe, sizes):
    os.write(pipe["w"], _raw_frame(json.dumps({"payload_sizes": sizes}).encode()))
    with pytest.raises(ProtocolError, match="bad payload_sizes"):
        recv(pipe["r"], time.monotonic() + 5)


def test_payloads_over_the_total_limit_are_a_protocol_error(pipe):
    sizes = [MAX_PAYLOAD_BYTES, 1]
    os.write(pipe["w"], _raw_frame(json.dumps({"payload_sizes": sizes}).encode()))
    with pytest.raises(ProtocolError, match="payloads exceed the size limit"):
        recv(pipe["r"], time.monotonic() + 5)


def test_header_without_payload_sizes_means_no_payloads(pipe):
    os.write(pipe["w"], _raw_frame(b'{"cmd":"hello"}'))
    header, payloads = recv(pipe["r"], time.monotonic() + 5)
    assert header == {"cmd": "hello"}
    assert payloads == []


def test_send_overrides_a_caller_supplied_payload_sizes(pipe):
    send(pipe["w"], {"payload_sizes": [999]}, [b"ab"])
    header, payloads = recv(pipe["r"], time.monotonic() + 5)
    assert header["payload_sizes"] == [2]
    assert payloads == [b"ab"]
