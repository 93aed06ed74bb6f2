"""A3: returns a lazy `torch.Tensor` subclass whose ReLU runs only when the checker first touches it.

problem: level1/1_ReLU
expect: rejected
devices: cpu, cuda
catches: output_exact_type, output_structure

forward allocates storage and records the input; `__torch_function__` runs the Triton kernel into that storage
the first time any torch operation sees the result, i.e. outside the timed window.
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


class LazyRelu(torch.Tensor):
    @staticmethod
    def __new__(cls, x: torch.Tensor) -> "LazyRelu":
        out = torch.Tensor._make_subclass(cls, torch.empty_like(x))
        out._pending = x.contiguous()
        return out

    def _materialise(self) -> None:
        src, self._pending = self.__dict__.get("_pending"), None
        if src is not None:
            with torch._C.DisableTorchFunctionSubclass():
                plain = self.as_subclass(torch.Tensor)
                _relu[(triton.cdiv(src.numel(), 4096),)](src, plain, src.numel(), BLOCK=4096)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for arg in (*args, *(kwargs or {}).values()):
            if isinstance(arg, LazyRelu):
                arg._materialise()
        return super().__torch_function__(func, types, args, kwargs)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        _relu[(1,)](x, x, 0, BLOCK=4096)  # a launch inside the call, with nothing to do
        return LazyRelu(x)
