"""Before any candidate call: static triage of the source, starting both children, loading both models."""

from __future__ import annotations

import ast
import time
import traceback
from dataclasses import dataclass

from services.errors import (
    ChildDied,
    ChildError,
    ChildTimedOut,
    DeviceMemoryShort,
    EarlyVerdict,
    EvaluationError,
    InfrastructureFault,
    ProtocolError,
    ReferenceFailed,
)
from services.parent.link import Link
from services.parent.record import Record
from services.parent.references import KeptReferences
from services.parsing import parse
from services.problems import Problem
from services.protocol.messages import (
    START_NO_DEVICE_MEMORY,
    Call,
    Called,
    Command,
    Load,
    Loaded,
    Release,
    Released,
    command_header,
)
from services.sandbox import Child, ChildPool
from services.schema import Check, CheckName, Verdict
from services.static import triage


def refuse_unparsable(candidate: str) -> ast.Module:
    """The candidate's syntax tree. One Python cannot parse is a compile error before any child or device memory is
    given to it: its import in a child would fail the same way (the same interpreter compiles it), after waiting for
    both."""
    try:
        return parse(candidate, "kg_candidate.py")
    except SyntaxError as exc:
        shown = "".join(traceback.format_exception_only(exc)).rstrip()
        raise EarlyVerdict(Verdict.COMPILE_ERROR, f"Error while importing the candidate:\n{shown}") from None


# What lets a module bind a name its source never spells (a namespace written through, code run from strings, a
# module `__getattr__`, names imported wholesale): a source with none of them that never spells `ModelNew` has none.
_BINDS_UNSPELLED = frozenset(
    {"globals", "locals", "vars", "setattr", "exec", "eval", "compile", "__import__", "__dict__", "__builtins__"}
    | {"__setattr__", "f_globals", "f_locals", "builtins", "sys", "importlib", "types", "inspect", "gc", "ctypes"}
    | {"__getattr__", "*"}
)


def refuse_without_model_new(candidate: str, tree: ast.Module) -> None:
    """A compile error before any child for a source that cannot define `ModelNew` (an RL answer that named its
    class otherwise or left it out): its load would say the same after waiting for both children. A source that
    could bind the name without spelling it is left to the load. Names are read from the syntax tree, where the
    parser has normalised them (`class ＭodelNew` defines `ModelNew`), with every string and bytes constant."""
    if "ModelNew" in candidate:
        return
    for node in ast.walk(tree):
        for name in _spelled(node):
            if "ModelNew" in name or name in _BINDS_UNSPELLED:
                return
    raise EarlyVerdict(
        Verdict.COMPILE_ERROR,
        "The candidate defines no class `ModelNew`: the module must define `class ModelNew(nn.Module)` with the "
        "reference's constructor arguments and a `forward` that takes its inputs.",
    )


def _spelled(node: ast.AST) -> list[str]:
    """The names and strings a node spells."""
    match node:
        case ast.Name(id=name) | ast.Attribute(attr=name) | ast.arg(arg=name):
            return [name]
        case ast.ClassDef(name=name) | ast.FunctionDef(name=name) | ast.AsyncFunctionDef(name=name):
            return [name]
        case ast.alias(name=name, asname=asname):
            return [name.split(".")[0], asname or ""]
        case ast.ImportFrom(module=str() as module):  # `from sys import modules`
            return [module.split(".")[0]]
        case ast.keyword(arg=name) if name is not None:
            return [name]
        case ast.Global(names=names) | ast.Nonlocal(names=names):
            return list(names)
        case ast.Constant(value=str() as text):
            return [text]
        case ast.Constant(value=bytes() as data):  # a pickled or marshalled name
            return [data.decode("latin-1")]
    return []


def static_triage(record: Record, candidate: str, tree: ast.Module) -> None:
    """AST triage (of `candidate`'s `tree`) before anything runs: every finding is a check, hard ones reject, the
    rest are advisory. A source with no `class ModelNew` statement is left to the load, which says exactly why
    (one that cannot bind the name at all was refused before: `refuse_without_model_new`)."""
    if not any(isinstance(node, ast.ClassDef) and node.name == "ModelNew" for node in ast.walk(tree)):
        return
    findings = triage(candidate)
    for f in findings:
        record.checks.append(
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


@dataclass(frozen=True)
class StartOutcome:
    """How the link's children started: whether the reference child was one kept from an earlier evaluation of
    the problem, and what the two starts waited for (a child still starting, closed children to die)."""

    reference_kept: bool
    ready_wait_s: float
    drain_s: float


def start_children(link: Link, pool: ChildPool, kept: KeptReferences, problem: Problem, candidate: str) -> StartOutcome:
    """Give the link a reference child (one `kept` from an earlier evaluation of the problem, else one from the
    pool) and a candidate child from the pool, each with its job: the link holds each child as soon as it has it, so
    a cancel kills a child still starting. Nothing of the request has run in a starting child, so a failure here is
    the machine's (InfrastructureFault)."""
    deadline = time.monotonic() + link.settings.child_start_timeout_s
    link.ref = earlier = kept.take(kept.key(link.device, problem))
    if earlier is not None:
        try:
            start_job(link, earlier, "reference", problem.source, None, deadline)
        except InfrastructureFault:  # it died while kept (anything of this user may kill it) and so did its stand-in
            link.ref.close()
            link.ref = None
    reused = earlier is not None and link.ref is earlier
    link.cand = pool.acquire(link.device)
    if link.ref is None:
        link.ref = pool.acquire(link.device)
        start_job(link, link.ref, "reference", problem.source, None, deadline)
    start_job(link, link.cand, "candidate", problem.source, candidate, deadline)
    return StartOutcome(
        reference_kept=reused,
        ready_wait_s=link.ref.waited_ready_s + link.cand.waited_ready_s,
        drain_s=link.ref.waited_drain_s + link.cand.waited_drain_s,
    )


def acquire_references(link: Link, pool: ChildPool, n: int) -> list[Child]:
    """`n` more children for timing the reference in several processes, taken together so that those still
    starting start side by side; they belong to the link (closed with it) until retired."""
    children = [pool.acquire(link.device) for _ in range(n)]
    link.others.extend(children)
    return children


def start_references(link: Link, children: list[Child], problem: Problem) -> list[Child]:
    """Give those children the reference's job, load it and run it once in each, side by side; the children that
    run it (`start_job`). The call, outside the timing slot, is what a fresh process does first and once: its
    inputs' and outputs' device memory (kept in its allocator's cache for the timed calls) and the first launch of
    each of its kernels, which loads the kernel's module (and makes cuDNN's handle for a convolution). Inside the
    slot the device would idle while they wait for the host's driver, which on a host of several busy GPUs takes
    such work in turn; side by side, each process's waits overlap the others'."""
    t = time.monotonic()
    started = [
        start_job(link, child, "reference", problem.source, None, t + link.settings.child_start_timeout_s)
        for child in children
    ]
    deadline = time.monotonic() + link.settings.load_timeout_s
    link.ask_references(started, [Load()] * len(started), Loaded, deadline, "loading the reference")
    deadline = time.monotonic() + link.settings.correctness_timeout_s
    calls: list[Command] = [Call(seed=link.seed("further", child.proc.pid)) for child in started]
    link.ask_references(started, calls, Called, deadline, "running the reference")
    link.ask_references(started, [Release()] * len(started), Released, deadline, "releasing tensors")
    return started


def start_job(link: Link, child: Child, role: str, reference: str, candidate: str | None, deadline: float) -> Child:
    """Give `child` its job, and return the child that runs it. One that died before its job is replaced in the
    link by a fresh child, once: nothing of any request ran in it (a starting child whose CUDA context found the
    device full while it waited in the pool exits so: on an H100 beside 3 busy GPUs, an honest candidate's
    evaluation got `failed` from one)."""
    header = command_header(link.job(role, reference, candidate))
    replaced = False
    while True:
        link.stop_if_cancelled()
        try:
            child.start_job(header, deadline)
            return child
        except (ChildDied, ChildTimedOut, ProtocolError) as exc:
            link.stop_if_cancelled()
            if replaced or not isinstance(exc, ChildDied):
                raise start_failure(role, exc, child.output_tail(), link.memory_shared) from None
            fresh = Child(link.device, link.settings)
            link.replace(child, fresh)
            child.close()
            child, replaced = fresh, True


def start_failure(role: str, exc: ChildError, output: str, memory_shared: bool) -> EvaluationError:
    """Whose fault a child's failure to start is, nothing of the request having run in it: the machine's, unless
    its CUDA context found no device memory while other evaluations shared the device, which running again alone
    settles (DeviceMemoryShort, not the problem's sizes)."""
    if isinstance(exc, ChildDied) and exc.status == START_NO_DEVICE_MEMORY and memory_shared:
        return DeviceMemoryShort(f"a {role} child found no device memory for its CUDA context", problem_sized=False)
    return InfrastructureFault(f"a {role} child failed to start: {exc}; output:\n{output}")


def load(link: Link, record: Record) -> int:
    """Import and construct the reference's Model and the candidate's ModelNew (its first code to run) side by
    side, in one turn of the device: a model's construction is mostly the host's work (weights initialised on the
    CPU, then moved), and a measurement waiting for the turn waits for the slower of the two rather than both. The
    candidate child's threads before then are the record's baseline; the reference's reply is taken first, so its
    failure is the reference's whatever the candidate did. Returns the device memory the loaded reference holds, as
    its child counts it."""
    deadline = time.monotonic() + link.settings.load_timeout_s
    record.evidence.thread_baseline = link.cand.threads()  # before any candidate code runs
    with link.gpu_turn("loading the reference and ModelNew"):
        posted = link.post(link.cand, Load())
        loaded, _ = link.ask(link.ref, Load(), Loaded, deadline, "loading the reference")
        left = link.ref.descendants()
        if left:  # a reference loads; it starts nothing that outlives the call (native code past the audit hook)
            raise ReferenceFailed(f"the reference left {len(left)} process(es) running after loading")
        link.ask(link.cand, Load(), Loaded, deadline, "importing and constructing ModelNew", posted_at=posted)
    return max(0, loaded.device_bytes)
