"""A3: returns a plain `torch.Tensor` whose own `.detach`/`.reshape`/`.float`/`.clone`/... run the ReLU on first use.

problem: level1/1_ReLU
expect: not_passed
devices: cpu, cuda
catches: output_exact_type, output_stable_after_return

`type(out) is torch.Tensor` holds, but the instance carries attributes that shadow the class's methods. A harness
that calls a method bound to the returned object (e.g. `t.detach().to("cpu")` or `t.reshape(...)` to deliver it)
runs the real kernel outside the timed window. Sound outcomes: rejected (instance overrides found), or incorrect
(the harness reads the raw, never-written storage).
forward also launches its kernel with nothing to do, so a per-call launch check is satisfied.
"""

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


_HOOKED = ("detach", "reshape", "view", "float", "clone", "contiguous", "to", "cpu", "numpy", "flatten", "__getitem__")


def _lazy(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    state = {"src": x}

    def materialise() -> None:
        src = state.pop("src", None)
        if src is not None:
            _relu[(triton.cdiv(src.numel(), 4096),)](src, out, src.numel(), BLOCK=4096)

    def hook(name):
        unbound = getattr(torch.Tensor, name)

        def method(*args, **kwargs):
            materialise()
            return unbound(out, *args, **kwargs)

        return method

    for name in _HOOKED:
        setattr(out, name, hook(name))
    return out


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        _relu[(1,)](x, x, 0, BLOCK=4096)  # a launch inside the call, with nothing to do
        return _lazy(x)
