"""KernelGym's evaluation core: evaluate a candidate kernel against a problem's reference, in untrusted children
supervised by a trusted parent.

    from services import EvalOptions, Evaluator, bundled_problems

    problems = bundled_problems()
    with Evaluator() as evaluator:
        result, diagnostics = evaluator.evaluate(problems.load("level1/1_ReLU"), candidate_source, EvalOptions())

The names below are the core's public API; everything else in `services` is internal. Each is imported on first
use (PEP 562), so `import services` or `import services.schema` imports no torch: the gateway reads the schema
without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.device_lock import TimingSlot
    from services.errors import (
        DeviceMemoryShort,
        EvaluationCancelled,
        EvaluationError,
        InfrastructureFault,
        ReferenceFailed,
    )
    from services.evaluation import Diagnostics, Evaluation
    from services.evaluator import Evaluator, environment
    from services.problems import Problem, ProblemError, ProblemSet, bundled_kernel, bundled_problems
    from services.schema import Check, CheckName, EvalOptions, EvalRequest, EvalResult, Verdict
    from services.settings import EvalSettings
    from services.timing_cache import TimingStore

# Each public name, by the module that defines it.
_HOMES = {
    "Check": "services.schema",
    "CheckName": "services.schema",
    "DeviceMemoryShort": "services.errors",
    "Diagnostics": "services.evaluation",
    "EvalOptions": "services.schema",
    "EvalRequest": "services.schema",
    "EvalResult": "services.schema",
    "EvalSettings": "services.settings",
    "Evaluation": "services.evaluation",
    "EvaluationCancelled": "services.errors",
    "EvaluationError": "services.errors",
    "Evaluator": "services.evaluator",
    "InfrastructureFault": "services.errors",
    "Problem": "services.problems",
    "ProblemError": "services.problems",
    "ProblemSet": "services.problems",
    "ReferenceFailed": "services.errors",
    "TimingSlot": "services.device_lock",
    "TimingStore": "services.timing_cache",
    "Verdict": "services.schema",
    "bundled_kernel": "services.problems",
    "bundled_problems": "services.problems",
    "environment": "services.evaluator",
}

__all__ = [
    "Check",
    "CheckName",
    "DeviceMemoryShort",
    "Diagnostics",
    "EvalOptions",
    "EvalRequest",
    "EvalResult",
    "EvalSettings",
    "Evaluation",
    "EvaluationCancelled",
    "EvaluationError",
    "Evaluator",
    "InfrastructureFault",
    "Problem",
    "ProblemError",
    "ProblemSet",
    "ReferenceFailed",
    "TimingSlot",
    "TimingStore",
    "Verdict",
    "bundled_kernel",
    "bundled_problems",
    "environment",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use; a submodule's name falls through to the import."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'services' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
