"""Where training problems come from: a KernelBench-layout directory, a Parquet file (e.g. a local copy of the
Dr. Kernel RL data), or the service's own problem set. Nothing is downloaded at run time."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from gym_client import KernelGymClient


@dataclass(frozen=True)
class Problem:
    id: str
    reference: str  # the reference source, shown to the model
    problem_id: str | None = None  # set when the service knows the problem by id
    inline_reference: str | None = None  # set when the reference source is sent with each evaluation


def kernelbench_problems(root: str | Path, ids: list[str] | None = None) -> list[Problem]:
    """Every `*.py` under `root` (id = relative path without `.py`), or only `ids`; sent inline."""
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"no such problem directory: {base}")
    found = {p.relative_to(base).with_suffix("").as_posix(): p for p in sorted(base.rglob("*.py"))}
    found = {k: v for k, v in found.items() if not k.rsplit("/", 1)[-1].startswith("_")}
    chosen = ids or list(found)
    missing = [i for i in chosen if i not in found]
    if missing:
        raise KeyError(f"problems not found under {base}: {', '.join(missing)}")
    out = []
    for i in chosen:
        source = found[i].read_text()
        out.append(Problem(id=i, reference=source, inline_reference=source))
    return out


def parquet_problems(
    path: str | Path, reference_column: str = "reference", id_column: str | None = None
) -> list[Problem]:
    """One problem per row; the reference module (the ground truth) is in `reference_column`."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    columns = table.column_names
    if reference_column not in columns:
        raise KeyError(f"{path} has no column {reference_column!r} (columns: {', '.join(columns)})")
    if id_column is not None and id_column not in columns:
        raise KeyError(f"{path} has no column {id_column!r} (columns: {', '.join(columns)})")
    refs = table.column(reference_column).to_pylist()
    ids = table.column(id_column).to_pylist() if id_column else [f"row{i}" for i in range(len(refs))]
    return [Problem(id=str(i), reference=r, inline_reference=r) for i, r in zip(ids, refs, strict=True) if r]


def service_problems(client: KernelGymClient, ids: list[str] | None = None) -> list[Problem]:
    """Problems from the service's problem set, evaluated by id."""
    chosen = ids or client.problems()
    return [Problem(id=i, reference=client.problem(i), problem_id=i) for i in chosen]


def openrlhf_prompt(problem: Problem) -> dict[str, object]:
    """One row of an OpenRLHF prompt dataset (`--data.input_key prompt --data.label_key label
    --data.apply_chat_template`): the first turn's chat, and the label `rl_client/openrlhf_agent.py` reads (the
    service's problem id, or the reference source as JSON)."""
    from rl_client.prompts import opening

    label = problem.problem_id or json.dumps({"reference": problem.inline_reference or problem.reference})
    return {"prompt": opening(problem.reference), "label": label}


def write_openrlhf_prompts(problems: list[Problem], path: str | Path) -> int:
    """Write the problems as JSON lines of `openrlhf_prompt` rows; returns how many."""
    with Path(path).open("w") as out:
        for problem in problems:
            out.write(json.dumps(openrlhf_prompt(problem)) + "\n")
    return len(problems)
