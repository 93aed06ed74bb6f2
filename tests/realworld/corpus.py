"""The real-world kernel corpus: each file in `cases/` is a candidate, a reference and an expected verdict.

A case file holds, in order:

- a first comment naming the public source whose idiom it reproduces (repository, path, commit);
- a module docstring: a one-line description, then `expect: <verdict>` (what a GPU run at the published shapes
  should give: passed, incorrect, compile_error or runtime_error) and optionally `cpu: <verdict> (<why>)` where the
  Triton interpreter cannot reproduce the GPU's behaviour (a documented interpreter limit);
- the candidate (defines `ModelNew`);
- a line `# === reference ===`, then the reference in KernelBench form (`Model`, `get_inputs`,
  `get_init_inputs`).

Both halves are standalone modules; neither the checker nor the tests import the file as a whole.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

CASES_DIR = Path(__file__).resolve().parent / "cases"
MARKER = "# === reference ==="
VERDICTS = ("passed", "incorrect", "compile_error", "runtime_error", "timeout", "crashed", "rejected")


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    source: str
    description: str
    expect: str
    cpu_expect: str | None
    cpu_reason: str | None
    candidate: str
    reference: str

    def expected(self, device: str) -> str:
        """The verdict the evaluator should give on `device` (the GPU verdict unless a CPU limit is declared)."""
        return self.cpu_expect if device == "cpu" and self.cpu_expect else self.expect

    @property
    def mistake(self) -> bool:
        return self.expect != "passed"


def parse_case(path: Path) -> Case:
    text = path.read_text()
    if not text.startswith("# Idiom: "):
        raise ValueError(f"{path.name}: the first comment must name the source ('# Idiom: repo path @ commit')")
    candidate, sep, reference = text.partition(MARKER + "\n")
    if not sep:
        raise ValueError(f"{path.name}: no '{MARKER}' line")
    doc = ast.get_docstring(ast.parse(candidate), clean=True)
    if not doc:
        raise ValueError(f"{path.name}: no module docstring")
    description = doc.splitlines()[0]
    expect = re.search(r"^expect: (\w+)\s*$", doc, re.M)
    if not expect or expect[1] not in VERDICTS:
        raise ValueError(f"{path.name}: 'expect:' must be one of {VERDICTS}")
    cpu = re.search(r"^cpu: (\w+) \((.+)\)\s*$", doc, re.M)
    if cpu and cpu[1] not in VERDICTS:
        raise ValueError(f"{path.name}: 'cpu:' must be one of {VERDICTS}")
    return Case(
        name=path.stem,
        path=path,
        source=text,
        description=description,
        expect=expect[1],
        cpu_expect=cpu[1] if cpu else None,
        cpu_reason=cpu[2] if cpu else None,
        candidate=candidate,
        reference=reference,
    )


def load_cases(directory: Path = CASES_DIR) -> list[Case]:
    return [parse_case(p) for p in sorted(directory.glob("*.py"))]
