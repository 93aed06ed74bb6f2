"""The registry of static rules, keyed by finding code, and the finding a rule reports.

A finding code is stable and machine-readable: the check it becomes is `static_<code>`
(`services.schema.CheckName.static`), and `tests/services/test_check_names.py` keeps the two lists equal. The hard rules
reject without running; they are constructs a legitimate Triton kernel never needs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    code: str  # snake_case, e.g. "forbidden_import"
    hard: bool  # True: a finding rejects the evaluation without running it
    summary: str  # what the rule looks for, in a few words


@dataclass(frozen=True)
class Finding:
    code: str  # stable machine-readable, snake_case, e.g. "forbidden_import"
    line: int  # 1-based line in the candidate source (0 if not applicable)
    detail: str  # one short human sentence an LLM agent can act on, naming the construct
    hard: bool  # True: the evaluation is rejected without running


# Hard: rejected before anything runs.
NO_TRITON_KERNEL = Rule("no_triton_kernel", True, "no @triton.jit kernel at all")
FORBIDDEN_IMPORT = Rule("forbidden_import", True, "process, network, FFI or package-manager modules")
PROCESS_SPAWN = Rule("process_spawn", True, "starting, signalling or ending processes, exit hooks")
TIMER_PATCH = Rule("timer_patch", True, "rebinding torch, time, Triton or harness attributes")
PACKAGE_INSTALL = Rule("package_install", True, "installing packages at run time")
NUMERIC_FLAG_CHANGE = Rule("numeric_flag_change", True, "global numeric flags (also the reference's)")
# Advisory: reported to the agent; the dynamic checks decide.
ENV_MUTATION = Rule("env_mutation", False, "changing the process environment")
TENSOR_SUBCLASS = Rule("tensor_subclass", False, "tensor subclasses, dispatch modes, faked tensor methods")
PRECISION_DOWNGRADE = Rule("precision_downgrade", False, "casts to lower precision, TF32, autocast")
TORCH_COMPUTE_IN_FORWARD = Rule("torch_compute_in_forward", False, "PyTorch compute or torch.compile in forward")
EXCEPTION_FALLBACK = Rule("exception_fallback", False, "a handler that falls back to PyTorch or swallows errors")
RESULT_CACHE = Rule("result_cache", False, "results memoised across calls")
THREADING = Rule("threading", False, "work on other threads")
SIDE_STREAM = Rule("side_stream", False, "work on a side stream")
CUDA_GRAPH = Rule("cuda_graph", False, "CUDA graphs")
DYNAMIC_CODE = Rule("dynamic_code", False, "code generated or loaded at run time")
FRAME_INTROSPECTION = Rule("frame_introspection", False, "frames, the harness or other modules' namespaces")
FILE_IO = Rule("file_io", False, "files written or read outside the kernel's data")

RULES: dict[str, Rule] = {
    r.code: r
    for r in (
        NO_TRITON_KERNEL,
        FORBIDDEN_IMPORT,
        PROCESS_SPAWN,
        TIMER_PATCH,
        PACKAGE_INSTALL,
        NUMERIC_FLAG_CHANGE,
        ENV_MUTATION,
        TENSOR_SUBCLASS,
        PRECISION_DOWNGRADE,
        TORCH_COMPUTE_IN_FORWARD,
        EXCEPTION_FALLBACK,
        RESULT_CACHE,
        THREADING,
        SIDE_STREAM,
        CUDA_GRAPH,
        DYNAMIC_CODE,
        FRAME_INTROSPECTION,
        FILE_IO,
    )
}

HARD_CODES: frozenset[str] = frozenset(code for code, rule in RULES.items() if rule.hard)


@dataclass(frozen=True)
class NameRule:
    """A finding for every reference to a qualname in `names` or starting with one of `prefixes`; `detail` is
    formatted with the qualname as `q`."""

    rule: Rule
    names: frozenset[str]
    detail: str
    prefixes: tuple[str, ...] = ()

    def matches(self, q: str) -> bool:
        return q in self.names or q.startswith(self.prefixes)
