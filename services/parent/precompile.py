"""Compiling the candidate's Triton kernels before its first call, in a child that sees no GPU.

services.child.compiler says what the compiler child does and why it cannot disturb a measurement. The parent
posts the pass as the children start, lets it run while both models load, collects it before the first candidate
call, and copies the compiled kernels into the candidate child's Triton cache. The pass decides nothing: however
the compiler child ends (user code raising, a crash, the time limit), the evaluation goes on as it would without
it, the candidate child compiling what is missing; the outcome is reported, never judged.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from services.errors import ChildDied, ChildTimedOut, ProtocolError
from services.evaluation import PrecompileOutcome
from services.parent.link import Link
from services.problems import Problem
from services.protocol.messages import Failure, Precompile, Precompiled, command_header, decode_reply
from services.sandbox import TRITON_CACHE, ChildPool, copy_cache


@dataclass
class Pending:
    """A pass in flight in the link's `compiler` child (so a cancel kills it): when to stop waiting for it."""

    deadline: float = 0.0  # 0: nothing to collect
    outcome: PrecompileOutcome = field(default_factory=PrecompileOutcome)


def begin_precompile(
    link: Link, pool: ChildPool, problem: Problem, candidate: str, capability: tuple[int, int]
) -> Pending:
    """Start the pass in a compiler child, for a GPU of `capability`; `finish_precompile` collects it."""
    s = link.settings
    link.stop_if_cancelled()
    link.compiler = child = pool.acquire("compiler")
    pending = Pending()
    job = link.job("compiler", problem.source, candidate)
    try:
        child.start_job(command_header(job), time.monotonic() + s.child_start_timeout_s)
        child.post(command_header(Precompile(capability=capability)))
        pending.deadline = time.monotonic() + s.precompile_timeout_s
    except (ChildDied, ChildTimedOut, ProtocolError) as exc:
        pending.outcome.stopped = f"the compiler child did not start: {exc}"
    return pending


def finish_precompile(link: Link, pending: Pending, cache: str) -> PrecompileOutcome:
    """Wait for the pass (within `precompile_timeout_s` of its start), then copy what it compiled into the Triton
    cache directory `cache` (the candidate child's)."""
    outcome, child = pending.outcome, link.compiler
    assert child is not None  # set by begin_precompile, cleared only here
    try:
        if pending.deadline:
            header, _ = child.reply(pending.deadline)
            reply = decode_reply(Precompiled, header)
            if isinstance(reply, Failure):
                outcome.stopped = f"the compiler child failed: {reply.context}"
            else:
                outcome.kernels, outcome.modules, outcome.stopped = reply.kernels, reply.modules, reply.stopped
    except ChildTimedOut:  # killed; what it finished is in its cache all the same
        outcome.stopped = f"not done within {link.settings.precompile_timeout_s:g} s"
    except ChildDied as died:
        outcome.stopped = f"the compiler child {died.reason}"
    except ProtocolError as exc:
        outcome.stopped = f"bad message from the compiler child: {exc}"
    link.stop_if_cancelled()
    outcome.copied_files = copy_cache(
        os.path.join(child.tmpdir, TRITON_CACHE), cache, link.settings.precompile_cache_mb << 20
    )
    child.close()
    link.compiler = None
    return outcome
