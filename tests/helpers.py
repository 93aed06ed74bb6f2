"""Candidate sources shared by the tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from services.problems import bundled_kernel


def bundled_source(problem_id: str) -> str:
    return bundled_kernel(problem_id).read_text()


def unique(source: str) -> str:
    """The same kernel with a comment that makes it a new submission (no cache hit)."""
    return source + f"\n# {uuid.uuid4().hex}\n"


def small_relu_reference(init_body: str = "return []") -> str:
    """A ReLU reference on one 16x16 input, `init_body` the body of its `get_init_inputs`: for tests whose subject
    is what a reference's own code does."""
    return f"""
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 16)]


def get_init_inputs():
    {init_body}
"""


def reduced(source: str, sizes: dict[str, str]) -> str:
    """A KernelBench problem with its size lines replaced (published line -> reduced line; trailing spaces
    ignored), small enough for the interpreter. Each published line must occur exactly once."""
    for published, small in sizes.items():
        source, n = re.subn(rf"^{re.escape(published)}[ \t]*$", small, source, flags=re.M)
        assert n == 1, f"no single line {published!r} to reduce"
    return source


RELU_PREAMBLE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)


def triton_relu(x):
    out = torch.empty_like(x)
    n = x.numel()
    _relu[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096)
    return out
"""


def relu_candidate(forward_body: str, extra: str = "") -> str:
    """A ReLU candidate whose forward(self, x) runs `forward_body` (with `triton_relu` available)."""
    body = textwrap.indent(textwrap.dedent(forward_body).strip(), " " * 8)
    return (
        RELU_PREAMBLE + textwrap.dedent(extra) + f"\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n{body}\n"
    )


# A ReLU candidate whose Triton kernel reads and writes a terabyte past its buffers: an illegal memory access.
WILD_ACCESS = relu_candidate(
    "out = torch.empty_like(x)\n_wild[(1,)](x, out, 1 << 40, BLOCK=128)\ntorch.cuda.synchronize()\nreturn out",
    """
@triton.jit
def _wild(x_ptr, out_ptr, far, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) + far
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))
""",
)

# An autotuned ReLU: 12 configs, each compiled (and on a GPU benchmarked) at the first call.
AUTOTUNED = """
@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (256, 512, 1024, 2048) for w in (2, 4, 8)],
    key=["n"],
)
@triton.jit
def _relu_tuned(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.where(x < 0.0, 0.0, x), mask=mask)
"""
TUNED_BODY = """out = torch.empty_like(x)
n = x.numel()
_relu_tuned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
return out"""


# A ReLU kernel short enough for a tiny character-level model to learn in seconds; floor "0.0" is right,
# any other floor is wrong.
TINY_KERNEL = """```python
import torch
import triton
import triton.language as tl
@triton.jit
def k(x,o,n,B:tl.constexpr):
 i=tl.program_id(0)*B+tl.arange(0,B)
 m=i<n
 tl.store(o+i,tl.maximum(tl.load(x+i,mask=m),{floor}),mask=m)
class ModelNew(torch.nn.Module):
 def forward(self,x):
  o=torch.empty_like(x)
  k[(triton.cdiv(x.numel(),1024),)](x,o,x.numel(),B=1024)
  return o
```"""


CHAT_TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def char_tokenizer():
    """A character-level Hugging Face tokenizer with a chat template, built offline (ids 0-2: pad, unk, eos)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
    vocab = {tok: i for i, tok in enumerate(["<pad>", "<unk>", "<eos>", *chars])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>", unk_token="<unk>", chat_template=CHAT_TEMPLATE
    )


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """An ASGI app on a free local port, served by uvicorn in a thread; yields its base URL."""
    import uvicorn

    from kernelgym.stack import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True


# A reference that updates its input in place ({op}), and a Triton kernel that does the same ({expr}).
IN_PLACE_REFERENCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        {op}
        return x


def get_inputs():
    return [torch.randn(64, 48)]


def get_init_inputs():
    return []
"""
IN_PLACE_KERNEL = """
@triton.jit
def _inplace(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, {expr}, mask=mask)
"""
IN_PLACE_BODY = "_inplace[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)\nreturn x"


_PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_fresh_python(code: str) -> list[str]:
    """What `code` (dedented) prints, split on whitespace, run in a fresh interpreter that imports the project:
    for what a process keeps for life once done (a seccomp filter, capabilities given up)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": _PROJECT},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()
