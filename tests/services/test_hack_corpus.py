"""The adversarial corpus: every hack in `tests/corpus` must fail to pass, every honest control must pass.

Each corpus file is a complete candidate whose module docstring says what it does and what should happen:

    A5: output cache keyed on the input's data_ptr.        <- first line: row, then a one-line description

    problem: level1/1_ReLU                                 <- a bundled problem id
    expect: rejected | incorrect | not_passed | passed     <- not_passed: any verdict but passed
    devices: cpu, cuda                                     <- where the hack can be expressed
    catches: timed_output_recheck                          <- check codes expected to fire ("none" if no check)
    policy: strict                                         <- optional: evaluate under the strict policy
    uncaught_by_default: <why>                             <- optional: passes under the default policy, for
                                                              this reason; caught only with `policy:`

`test_corpus_verdict` checks only the verdict; `test_hack_caught_by_named_check` checks, separately, that a
rejected hack was rejected by one of the checks its file names, so the two can fail independently while the
defences are being built; every `rejected` or `timeout` result must record what triggered it (measured values
and thresholds). A hack that the default policy lets through is kept, with its reason, and tested both ways.
CPU runs use the Triton interpreter; files that list only `cuda` need a GPU.
"""

from __future__ import annotations

import ast
import contextlib
import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from services.schema import CheckName, EvalOptions, EvalResult, Verdict

CORPUS_DIR = Path(__file__).resolve().parents[1] / "corpus"
EXPECTS = ("passed", "rejected", "incorrect", "not_passed")
DEVICES = ("cpu", "cuda")
ISOLATED_ROWS = {"C4"}  # hangs, fork bombs and huge allocations get their own short-timeout evaluator
CHECK_NAMES = frozenset(name.value for name in CheckName)  # what a `catches:` line may name
LEFTOVERS = ("/tmp/kernelgym_pwned", "/dev/shm/kernelgym_pwned", "/dev/shm/kernelgym_hack_replay_*")


@dataclass(frozen=True)
class CorpusCase:
    path: Path
    row: str  # "A5", "B11", ... or "honest"
    description: str
    problem: str
    expect: str
    devices: tuple[str, ...]
    catches: tuple[str, ...]
    policy: str | None = None
    uncaught_by_default: str | None = None

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def honest(self) -> bool:
        return self.expect == "passed"


def parse_metadata(path: Path) -> CorpusCase:
    """The metadata in a corpus file's docstring; raises ValueError if it is missing or malformed."""
    doc = ast.get_docstring(ast.parse(path.read_text()), clean=True)
    if not doc:
        raise ValueError(f"{path.name}: no module docstring")
    first, *rest = doc.splitlines()
    row, sep, description = first.partition(":")
    if not sep or not description.strip():
        raise ValueError(f"{path.name}: first docstring line must be '<row>: <description>'")
    fields: dict[str, str] = {}
    for line in rest:
        if m := re.fullmatch(r"(problem|expect|devices|catches|policy|uncaught_by_default):\s*(.*?)\s*", line):
            if m[1] in fields:
                raise ValueError(f"{path.name}: duplicate '{m[1]}:' line")
            fields[m[1]] = m[2]
    missing = {"problem", "expect", "devices", "catches"} - fields.keys()
    if missing:
        raise ValueError(f"{path.name}: missing metadata {sorted(missing)}")

    def items(key: str) -> tuple[str, ...]:
        return tuple(v for v in (s.strip() for s in fields[key].split(",")) if v and v != "none")

    return CorpusCase(
        path=path,
        row="honest" if row.strip().lower().startswith("honest") else row.strip().upper(),
        description=description.strip(),
        problem=fields["problem"],
        expect=fields["expect"],
        devices=items("devices"),
        catches=items("catches"),
        policy=fields.get("policy") or None,
        uncaught_by_default=fields.get("uncaught_by_default") or None,
    )


def load_corpus(directory: Path = CORPUS_DIR) -> list[CorpusCase]:
    return [parse_metadata(p) for p in sorted(directory.glob("*.py")) if not p.name.startswith("_")]


def options_for(case: CorpusCase, device: str) -> EvalOptions:
    return EvalOptions(device=device, policy=case.policy)


def outcome_ok(case: CorpusCase, result: EvalResult) -> bool:
    """Whether a result is what the case's `expect:` asks for."""
    if case.expect == "not_passed":
        return result.verdict is not Verdict.PASSED and not result.correct
    return result.verdict.value == case.expect


def failure_message(case: CorpusCase, result: EvalResult) -> str:
    return f"{case.row} ({case.description}) expected {case.expect}: {describe_result(result)}"


def describe_result(result: EvalResult) -> str:
    failed = ", ".join(f"{c.name} ({c.detail})" for c in result.failed_checks()) or "none"
    return f"verdict={result.verdict.value}; failed checks: {failed}; feedback: {result.feedback[:600]}"


CORPUS = load_corpus()
_RESULTS: dict[tuple[str, str], EvalResult] = {}


def _marks(case: CorpusCase, device: str) -> list:
    if device != "cuda":
        return []
    return [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def _first_device(case: CorpusCase) -> str:
    return "cpu" if "cpu" in case.devices else "cuda"


@pytest.fixture(scope="module")
def isolated_evaluator():
    """Short timeouts and its own children, for the cases that hang, fork or exhaust memory."""
    from services.evaluator import Evaluator
    from services.settings import EvalSettings

    with Evaluator(
        EvalSettings(load_timeout_s=30, correctness_timeout_s=6, timing_timeout_s=15, warm_children=1)
    ) as ev:
        yield ev


@pytest.fixture(scope="module", autouse=True)
def _no_leftovers():
    """Remove what the filesystem hacks (C3) plant outside their private directories, before and after."""

    def clean() -> None:
        for pattern in LEFTOVERS:
            for path in glob.glob(pattern):
                with contextlib.suppress(OSError):
                    os.remove(path)

    clean()
    yield
    clean()


def evaluate_case(request, problems, case: CorpusCase, device: str, default_policy: bool = False) -> EvalResult:
    """Evaluate one corpus file once per device (under its policy, or the default one); later tests reuse it."""
    key = (case.name, device, default_policy)
    if key not in _RESULTS:
        fixture = "isolated_evaluator" if case.row in ISOLATED_ROWS else "evaluator"
        evaluator = request.getfixturevalue(fixture)
        _RESULTS[key] = evaluator.evaluate(
            problems.load(case.problem),
            case.path.read_text(),
            EvalOptions(device=device) if default_policy else options_for(case, device),
        ).result
    return _RESULTS[key]


def test_corpus_metadata_is_well_formed(problems):
    assert CORPUS, f"no corpus files in {CORPUS_DIR}"
    ids = set(problems.ids())
    for case in CORPUS:
        where = case.path.name
        assert case.problem in ids, f"{where}: unknown problem {case.problem!r}"
        assert case.expect in EXPECTS, f"{where}: expect must be one of {EXPECTS}"
        assert case.devices and set(case.devices) <= set(DEVICES), f"{where}: devices must be from {DEVICES}"
        assert case.policy in (None, "strict"), f"{where}: unknown policy {case.policy!r}"
        prefix = case.name.split("_", 1)[0]
        assert prefix == case.row.lower(), f"{where}: file name must start with its row ({case.row})"
        assert case.honest == (case.row == "honest"), f"{where}: honest controls (only) expect passed"
        for code in case.catches:
            assert code in CHECK_NAMES, f"{where}: unknown check code {code!r} (not a services.schema.CheckName)"
        if case.expect == "rejected":
            assert case.catches, f"{where}: a rejected hack must name the checks expected to fire"
        if case.uncaught_by_default:
            assert case.policy and not case.honest, f"{where}: uncaught_by_default needs the policy that catches it"
    assert sum(c.honest for c in CORPUS) >= 4
    assert len({c.problem for c in CORPUS if c.honest}) >= 4


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=_marks(c, _first_device(c))) for c in CORPUS])
def test_corpus_verdict(request, problems, case):
    result = evaluate_case(request, problems, case, _first_device(case))
    assert outcome_ok(case, result), (
        f"{case.row} ({case.description}) expected {case.expect}: {describe_result(result)}"
    )


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.name, marks=_marks(c, "cuda")) for c in CORPUS if set(c.devices) == set(DEVICES)]
)
def test_corpus_verdict_on_cuda(request, problems, case):
    """Files expressible on both devices, repeated on the GPU (their first run is on CPU)."""
    result = evaluate_case(request, problems, case, "cuda")
    assert outcome_ok(case, result), (
        f"{case.row} ({case.description}) expected {case.expect}: {describe_result(result)}"
    )


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.name, marks=_marks(c, _first_device(c))) for c in CORPUS if c.expect == "rejected"],
)
def test_hack_caught_by_named_check(request, problems, case):
    result = evaluate_case(request, problems, case, _first_device(case))
    failed = {c.name for c in result.failed_checks()}
    assert failed & set(case.catches), (
        f"{case.row} ({case.description}) should fail one of {list(case.catches)}: {describe_result(result)}"
    )


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.name, marks=_marks(c, _first_device(c))) for c in CORPUS if not c.honest]
)
def test_rejected_and_timeout_results_record_what_triggered_them(request, problems, case):
    result = evaluate_case(request, problems, case, _first_device(case))
    if result.verdict not in (Verdict.REJECTED, Verdict.TIMEOUT):
        pytest.skip(f"verdict {result.verdict.value}")
    audited = [c for c in result.failed_checks() if c.measured and c.thresholds]
    assert audited, f"{case.name}: nothing records what triggered it: {describe_result(result)}"


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.name, marks=_marks(c, _first_device(c))) for c in CORPUS if c.uncaught_by_default],
)
def test_hack_uncaught_by_default_passes_without_its_policy(request, problems, case):
    """Kept honest: if the default policy starts catching it, drop its `uncaught_by_default:` line."""
    result = evaluate_case(request, problems, case, _first_device(case), default_policy=True)
    assert result.verdict is Verdict.PASSED, (
        f"{case.name} is recorded as uncaught by default ({case.uncaught_by_default}): {describe_result(result)}"
    )
