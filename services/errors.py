"""The core's typed errors: callers ask what happened by type, never by the text of a message.

Text is not a type. A message can hold anything a candidate or a request's own reference printed or raised,
so nothing here is ever decided by searching it. The one error that implicates the machine,
`InfrastructureFault`, is raised only where the trusted parent observed the failure itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from services.schema import Verdict

if TYPE_CHECKING:
    from services.evaluation import Diagnostics


class EvaluationError(RuntimeError):
    """The evaluation could not produce a verdict for the candidate. `diagnostics`: how it ran until then, where
    `Evaluator.evaluate` raised it."""

    diagnostics: Diagnostics | None = None


class ReferenceFailed(EvaluationError):
    """The request's reference (or its `get_inputs()`) raised, hung, died or broke the protocol: the problem's
    fault, whatever it printed. A request may carry its own reference, so this is user code too."""


class InfrastructureFault(EvaluationError):
    """The machine failed under trusted code alone: a child that died or hung before any user code ran in it,
    or no device where one was expected. Only this counts towards quarantining a GPU."""


class DeviceMemoryShort(EvaluationError):
    """The evaluation needs more of a shared device's memory than it holds: neither the candidate's fault nor the
    problem's, nor a fault of the machine. The evaluator starts it again holding `units` of the device's memory
    (services.device_memory), or the whole device where `units` is 0 (it ran out beside others).
    `problem_sized`: the problem's sizes decide it (its estimate, the parent's buffers or the reference ran out), so
    its next candidates start with that; not where the candidate's child ran out (one greedy candidate says nothing
    of the next)."""

    def __init__(self, message: str, problem_sized: bool, units: int = 0):
        super().__init__(message)
        self.problem_sized = problem_sized
        self.units = units


class EvaluationCancelled(EvaluationError):
    """`Evaluator.cancel()` stopped the evaluation; the caller discards the outcome."""


class ChildError(Exception):
    """A child process stopped answering as it must (transport level, before any verdict is decided)."""


class ChildDied(ChildError):
    """The child exited or was killed; `reason` says how, `status` its exit status where it exited."""

    def __init__(self, reason: str, signal_name: str | None = None, status: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.signal_name = signal_name
        self.status = status


class ChildTimedOut(ChildError):
    """The child did not answer before its deadline (it has been killed)."""


class ProtocolError(ChildError):
    """A malformed, oversized, unauthenticated or mistyped message from a child."""


class EarlyVerdict(Exception):
    """A stage decided the candidate's verdict (a failure, a timeout, a rejection): the evaluation stops there.
    Not an EvaluationError: the evaluation did produce a verdict. `reached`: the outcome of the stage it ended, as
    far as the stage got, where the result reports that (whether the candidate compiled, its profile); None
    otherwise."""

    def __init__(self, verdict: Verdict, feedback: str, reached: object = None):
        super().__init__(feedback)
        self.verdict = verdict
        self.feedback = feedback
        self.reached = reached


@contextmanager
def reaching(outcome: object) -> Iterator[None]:
    """An EarlyVerdict out of the block carries `outcome` (a stage's, filled in as the stage goes)."""
    try:
        yield
    except EarlyVerdict as early:
        early.reached = outcome
        raise
