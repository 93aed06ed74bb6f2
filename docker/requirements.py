"""Print the pinned requirements of the package's base and the named extras, one a line, so an image can
install its dependencies in a layer of their own (rebuilt only when pyproject.toml changes), before the
source, which changes far more often.

    python docker/requirements.py pyproject.toml service core > /tmp/requirements.txt
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path


def requirements(pyproject: Path, extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise SystemExit(f"unknown extras: {', '.join(unknown)} (pyproject.toml has {', '.join(optional)})")
    lines = list(project["dependencies"])
    for extra in extras:
        lines += [r for r in optional[extra] if r not in lines]
    return lines


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("usage: requirements.py PYPROJECT [EXTRA ...]")
    print("\n".join(requirements(Path(sys.argv[1]), sys.argv[2:])))
