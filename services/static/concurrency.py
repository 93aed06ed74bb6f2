"""Work the timer might not see (advisory): other threads, side streams, CUDA graphs. The child's guards and the
parent's device-wide sync check the same at run time."""

from __future__ import annotations

import ast

from services.static.names import const_str
from services.static.rules import CUDA_GRAPH, SIDE_STREAM, THREADING, NameRule
from services.static.scan import Scan

SIDE_STREAMS = frozenset(
    {
        "torch.cuda.Stream",
        "torch.cuda.stream",
        "torch.cuda.set_stream",
        "torch.cuda.ExternalStream",
        "torch.cuda.StreamContext",
        "torch.cuda.streams.Stream",
        "torch.cuda.streams.ExternalStream",
        "torch.Stream",
    }
)
CUDA_GRAPHS = frozenset(
    {
        "torch.cuda.CUDAGraph",
        "torch.cuda.graph",
        "torch.cuda.make_graphed_callables",
        "torch.cuda.graph_pool_handle",
        "torch.cuda.graphs.CUDAGraph",
        "torch.cuda.graphs.graph",
        "torch.cuda.graphs.make_graphed_callables",
    }
)
THREAD_NAMES = frozenset({"torch.jit.fork", "torch.jit._fork"})
GRAPH_COMPILE_MODES = ("reduce-overhead", "max-autotune")

SIDE_STREAM_RULE = NameRule(SIDE_STREAM, SIDE_STREAMS, "{q}: launch on the current stream so the timer sees the work.")
CUDA_GRAPH_RULE = NameRule(CUDA_GRAPH, CUDA_GRAPHS, "{q}: the harness times graphs itself; launch the kernel directly.")
THREAD_RULE = NameRule(THREADING, THREAD_NAMES, "{q} runs work on another thread; finish work before returning.")


def check_compile_mode(scan: Scan, node: ast.Call, fname: str) -> None:
    mode = const_str(next((k.value for k in node.keywords if k.arg == "mode"), None))
    if mode in GRAPH_COMPILE_MODES:
        scan.add(CUDA_GRAPH, node, f'torch.compile(mode="{mode}") replays CUDA graphs; remove it.')


def check_wait_stream(scan: Scan, node: ast.Call, method: str) -> None:
    scan.add(SIDE_STREAM, node, ".wait_stream() implies work on a side stream; use the current stream.")


CALLS = {"torch.compile": check_compile_mode}
METHODS = {"wait_stream": check_wait_stream}
