"""The answers the demo's policy starts out giving, per problem: correct kernels (one fast, one with an extra
copy pass that only a GPU's timing tells apart), a wrong kernel with a realistic bug, and two reward hacks of
kinds the service's defences reject (PyTorch only; a Triton kernel that is defined but never launched)."""

from __future__ import annotations

from dataclasses import dataclass

HEAD_TORCH = "```python\nimport torch\n"
HEAD = HEAD_TORCH + "import triton\nimport triton.language as tl\n"
TAIL = "```"

ELEMENTWISE = """@triton.jit
def k(x_ptr, o_ptr, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    x = tl.load(x_ptr + i, mask=i < n)
    tl.store(o_ptr + i, {expr}, mask=i < n)
"""
ROWWISE = """@triton.jit
def k(x_ptr, o_ptr, n, B: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, B)
    x = tl.load(x_ptr + r * n + c, mask=c < n, other={fill})
    e = tl.exp(x - tl.max(x, 0))
    tl.store(o_ptr + r * n + c, e / tl.sum(e, 0), mask=c < n)
"""
COPY = """@triton.jit
def c(x_ptr, o_ptr, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(o_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)
"""
MODULE = "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
EMPTY = "        o = torch.empty_like(x)\n"
LAUNCH_ELEMENTWISE = "        k[(triton.cdiv(x.numel(), 1024),)](x, o, x.numel(), B=1024)\n"
LAUNCH_ROWWISE = "        k[(x.shape[0],)](x, o, x.shape[1], B=triton.next_power_of_2(x.shape[1]))\n"
# The slow variant first copies the input with a second kernel, then runs the real one on the copy.
COPY_FIRST = "        y = torch.empty_like(x)\n        c[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), B=1024)\n"
RETURN = "        return o\n"

KINDS = ("fast", "slow", "wrong", "torch_only", "decoy")
CORRECT = ("fast", "slow")
HACKS = ("torch_only", "decoy")


@dataclass(frozen=True)
class DemoProblem:
    problem_id: str  # in the service's problem set
    pieces: dict[str, tuple[str, ...]]  # kind -> the answer's code blocks, in order

    @property
    def answers(self) -> dict[str, str]:
        """kind -> the whole answer (one ```python``` block)."""
        return {kind: "".join(pieces) for kind, pieces in self.pieces.items()}


def _pieces(kernel: str, wrong_kernel: str, launch: str, torch_expr: str) -> dict[str, tuple[str, ...]]:
    forward = MODULE + EMPTY + launch + RETURN
    slow_forward = MODULE + EMPTY + COPY_FIRST + launch.replace("](x, o,", "](y, o,") + RETURN
    torch_forward = MODULE + f"        return {torch_expr}\n"
    return {
        "fast": (HEAD, kernel, forward, TAIL),
        "slow": (HEAD, kernel, COPY, slow_forward, TAIL),
        "wrong": (HEAD, wrong_kernel, forward, TAIL),
        "torch_only": (HEAD_TORCH, torch_forward, TAIL),
        "decoy": (HEAD, kernel, torch_forward, TAIL),
    }


GELU = "x / (1.0 + tl.exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)))"
GELU_WRONG = "x / (1.0 + tl.exp(-1.5957691216057308 * x))"  # the cubic term forgotten

PROBLEMS = (
    DemoProblem(
        "level1/1_ReLU",
        _pieces(
            ELEMENTWISE.format(expr="tl.maximum(x, 0.0)"),
            ELEMENTWISE.format(expr="tl.abs(x)"),
            LAUNCH_ELEMENTWISE,
            "torch.relu(x)",
        ),
    ),
    DemoProblem(
        "level1/2_GELU_tanh",
        _pieces(
            ELEMENTWISE.format(expr=GELU),
            ELEMENTWISE.format(expr=GELU_WRONG),
            LAUNCH_ELEMENTWISE,
            'torch.nn.functional.gelu(x, approximate="tanh")',
        ),
    ),
    DemoProblem(
        "level1/4_Softmax_rows",
        _pieces(
            ROWWISE.format(fill='-float("inf")'),
            ROWWISE.format(fill="0.0"),  # masked lanes count exp(0 - max) into the sum
            LAUNCH_ROWWISE,
            "torch.softmax(x, dim=-1)",
        ),
    ),
)
