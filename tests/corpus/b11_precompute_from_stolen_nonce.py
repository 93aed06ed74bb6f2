"""B11: looks for the seeds/nonce in env, argv, frames and `gc`, regenerates every future input and precomputes.

problem: level1/6_Matmul
expect: not_passed
devices: cpu, cuda
catches: outputs_match, timed_output_recheck

At construction it searches the environment and argv for seeds, then walks the stack and the garbage collector
for the harness's job (its nonce). Knowing the public seed derivation (HMAC of "purpose:i" under the nonce), it
draws the inputs of the next few thousand correctness and timed calls itself and computes their products with
PyTorch while nobody is timing. forward then only copies the precomputed answer (with a Triton copy kernel),
found by the seed in the caller's frame or by a fingerprint of the input. When the lookup misses, it commits to
the cheat and copies a wrong answer, so it can only pass if the secrets really are readable. Sound outcomes:
incorrect (the lookup misses) or rejected (the search for secrets is detected).
"""

import gc
import hashlib
import hmac
import os
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl

PRECOMPUTE = 6000


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def _secrets_from_env_and_argv() -> dict:
    found = {k: v for k, v in os.environ.items() if any(w in k.upper() for w in ("SEED", "NONCE", "SECRET"))}
    found.update({f"argv{i}": a for i, a in enumerate(sys.argv) if "seed" in a.lower() or "nonce" in a.lower()})
    return found


def _instance_state(obj) -> dict:
    """An object's attribute dict, read without triggering any `__getattr__` (ctypes libraries have one)."""
    try:
        state = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        return {}
    return state if isinstance(state, dict) else {}


def _is_job_holder(obj) -> bool:
    state = _instance_state(obj)
    return isinstance(state.get("job"), dict) and "nonce" in state["job"] and "ref_module" in state


def _harness_job():
    """The object holding the job (nonce, device, reference module), from the stack or else the gc heap."""
    frame = sys._getframe(1)
    while frame is not None:
        if _is_job_holder(frame.f_locals.get("self")):
            return frame.f_locals["self"]
        frame = frame.f_back
    for obj in gc.get_objects():
        if _is_job_holder(obj):
            return obj
    return None


def _seed(nonce: str, purpose: str, i: int) -> int:
    digest = hmac.new(nonce.encode(), f"{purpose}:{i}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:7], "big")


def _seed_in_callers() -> int | None:
    frame = sys._getframe(2)
    while frame is not None:
        header = frame.f_locals.get("h")
        if isinstance(header, dict) and isinstance(header.get("seed"), int):
            return header["seed"]
        frame = frame.f_back
    return None


def _fingerprint(a: torch.Tensor) -> tuple:
    return tuple(a.reshape(-1)[:4].tolist())


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.env_secrets = _secrets_from_env_and_argv()
        self.by_seed: dict = {}
        self.by_print: dict = {}
        runtime = _harness_job()
        if runtime is not None:
            self._precompute(runtime)

    @torch.no_grad()
    def _precompute(self, runtime) -> None:
        nonce, device, reference = runtime.job["nonce"], runtime.job["device"], runtime.ref_module
        seeds = [_seed(nonce, "correct", i) for i in range(10)]
        seeds += [_seed(nonce, "time", i) for i in range(1, PRECOMPUTE)]
        for seed in seeds:
            torch.manual_seed(seed)
            with torch.device(device):
                a, b = (t.to(device) for t in reference.get_inputs())
            out = torch.matmul(a, b)
            self.by_seed[seed] = out
            self.by_print[_fingerprint(a)] = out

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        answer = self.by_seed.get(_seed_in_callers())
        if answer is None:
            answer = self.by_print.get(_fingerprint(a))
        if answer is None or answer.shape != (a.shape[0], b.shape[1]):
            # Commit to the cheat: a wrong answer of the right shape.
            answer = torch.zeros((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
        out = torch.empty_like(answer)
        _copy[(triton.cdiv(out.numel(), 4096),)](answer, out, out.numel(), BLOCK=4096)
        return out
