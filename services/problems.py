"""Reference problems in KernelBench format, from one file or a KernelBench-like directory.

Torch-free: problems are source text until a child process imports them. A problem set maps ids to
files: `level1/19_ReLU.py` is id `level1/19_ReLU`, so a KernelBench checkout works as is.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from services.parsing import parse

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
BUNDLED_PROBLEMS = BUNDLED_DIR / "problems"
BUNDLED_KERNELS = BUNDLED_DIR / "kernels"
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


class ProblemError(ValueError):
    """A reference that cannot serve as a problem (missing file, bad syntax, missing names)."""


@dataclass(frozen=True)
class Problem:
    id: str
    source: str
    path: Path | None = None

    @property
    def name(self) -> str:
        return self.id.rsplit("/", 1)[-1]

    @property
    def digest(self) -> str:
        """The reference source's SHA-256: what identifies the problem to what is kept per problem."""
        return hashlib.sha256(self.source.encode()).hexdigest()


def check_reference_source(source: str, where: str) -> None:
    try:
        tree = parse(source)
    except SyntaxError as exc:
        line = f", line {exc.lineno}" if exc.lineno else ""
        raise ProblemError(f"{where}: reference is not valid Python ({exc.msg}{line})") from exc
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    missing = [n for n in REQUIRED_NAMES if n not in defined]
    if missing:
        raise ProblemError(f"{where}: reference must define {', '.join(missing)} at module level")


def load_problem_file(path: str | Path, problem_id: str | None = None) -> Problem:
    path = Path(path)
    if not path.is_file():
        raise ProblemError(f"no such reference file: {path}")
    source = path.read_text()
    check_reference_source(source, str(path))
    return Problem(id=problem_id or path.stem, source=source, path=path)


class ProblemSet:
    """All `*.py` problems under a directory, by id (relative path without `.py`)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise ProblemError(f"no such problem directory: {self.root}")

    def ids(self) -> list[str]:
        found = (p.relative_to(self.root).with_suffix("").as_posix() for p in self.root.rglob("*.py"))
        return sorted(i for i in found if not i.rsplit("/", 1)[-1].startswith("_"))

    def path(self, problem_id: str) -> Path:
        candidate = (self.root / f"{problem_id}.py").resolve()
        if self.root.resolve() not in candidate.parents or not candidate.is_file():
            raise ProblemError(f"unknown problem id {problem_id!r} in {self.root}")
        return candidate

    def load(self, problem_id: str) -> Problem:
        return load_problem_file(self.path(problem_id), problem_id)


def bundled_problems() -> ProblemSet:
    return ProblemSet(BUNDLED_PROBLEMS)


def bundled_kernel(problem_id: str) -> Path:
    """The honest example solution shipped for a bundled problem."""
    path = BUNDLED_KERNELS / f"{problem_id}.py"
    if not path.is_file():
        raise ProblemError(f"no bundled kernel for {problem_id!r}")
    return path
