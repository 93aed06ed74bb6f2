"""Before any candidate call: static triage of the source, starting both children, loading both models."""

from __future__ import annotations

import ast
import time

from services.errors import (
    ChildDied,
    ChildTimedOut,
    EarlyVerdict,
    InfrastructureFault,
    ProtocolError,
    ReferenceFailed,
)
from services.parent.references import KeptReferences
from services.parent.session import Session
from services.parsing import parse
from services.problems import Problem
from services.protocol.messages import Job, Load, Loaded, command_header
from services.sandbox import Child, ChildPool
from services.schema import Check, CheckName, Verdict
from services.static_checks import triage


def static_triage(session: Session, candidate: str) -> None:
    """AST triage before anything runs: every finding is a check, hard ones reject, the rest are advisory. A
    source that does not parse or defines no ModelNew is left to the load, which says exactly why."""
    try:
        tree = parse(candidate)
    except SyntaxError:
        return
    if not any(isinstance(node, ast.ClassDef) and node.name == "ModelNew" for node in ast.walk(tree)):
        return
    findings = triage(candidate)
    for f in findings:
        session.checks.append(
            Check(
                name=CheckName.static(f.code),
                passed=False,
                detail=f"line {f.line}: {f.detail}",
                advisory=not f.hard,
                measured={"line": f.line, "findings": sum(g.code == f.code for g in findings)},
                thresholds={"findings": 0} if f.hard else {},
            )
        )
    hard = [f for f in findings if f.hard]
    if hard:
        raise EarlyVerdict(
            Verdict.REJECTED,
            "Rejected before running: " + "; ".join(f"line {f.line}: {f.detail}" for f in hard[:5]),
        )


def start_children(session: Session, pool: ChildPool, kept: KeptReferences, problem: Problem, candidate: str) -> bool:
    """Give a reference child (one `kept` from an earlier evaluation of the problem, else one from the pool) and a
    candidate child from the pool each its job; whether the reference child was a kept one. Nothing of the request
    has run in a starting child, so a failure here is the machine's (InfrastructureFault)."""
    deadline = time.monotonic() + session.settings.child_start_timeout_s
    session.ref = kept.take(kept.key(session.device, problem))
    reused = session.ref is not None
    if reused:
        try:
            _start_job(session, session.ref, "reference", problem.source, None, deadline)
        except InfrastructureFault:  # it died while kept (anything of this user may kill it): a fresh one
            session.ref.close()
            session.ref, reused = None, False
    session.cand = pool.acquire(session.device)
    if session.ref is None:
        session.ref = pool.acquire(session.device)
        _start_job(session, session.ref, "reference", problem.source, None, deadline)
    _start_job(session, session.cand, "candidate", problem.source, candidate, deadline)
    return reused


def acquire_references(session: Session, pool: ChildPool, n: int) -> list[Child]:
    """`n` more children for timing the reference in several processes, taken together so that those still
    starting start side by side; they belong to the session (closed with it) until retired."""
    children = [pool.acquire(session.device) for _ in range(n)]
    session.others.extend(children)
    return children


def start_reference(session: Session, child: Child, problem: Problem) -> None:
    """Give one of those children the reference's job and load it."""
    t = time.monotonic()
    _start_job(session, child, "reference", problem.source, None, t + session.settings.child_start_timeout_s)
    session.ask(child, Load(), Loaded, time.monotonic() + session.settings.load_timeout_s, "loading the reference")


def make_job(session: Session, role: str, reference: str, candidate: str | None) -> Job:
    """The job of one of the session's children (a reference, candidate or compiler child)."""
    return Job(
        nonce=session.nonce,
        role=role,
        device=session.device,
        reference_source=reference,
        candidate_source=candidate,
        init_seed=session.seed("init", 0),
        l2_flush_factor=session.settings.l2_flush_factor,
        defences=session.defended,
    )


def _start_job(
    session: Session, child: Child, role: str, reference: str, candidate: str | None, deadline: float
) -> None:
    session.stop_if_cancelled()
    job = make_job(session, role, reference, candidate)
    try:
        child.start_job(command_header(job), deadline)
    except (ChildDied, ChildTimedOut, ProtocolError) as exc:
        session.stop_if_cancelled()
        output = child.output_tail()
        raise InfrastructureFault(f"a {role} child failed to start: {exc}; output:\n{output}") from None


def load(session: Session) -> None:
    """Import and construct the reference's Model, then the candidate's ModelNew (its first code to run)."""
    deadline = time.monotonic() + session.settings.load_timeout_s
    session.ask(session.ref, Load(), Loaded, deadline, "loading the reference")
    left = session.ref.descendants()
    if left:  # a reference loads; it starts nothing that outlives the call (native code past the audit hook)
        raise ReferenceFailed(f"the reference left {len(left)} process(es) running after loading")
    session.evidence.thread_baseline = session.cand.threads()  # before any candidate code runs
    session.ask(session.cand, Load(), Loaded, deadline, "importing and constructing ModelNew")
