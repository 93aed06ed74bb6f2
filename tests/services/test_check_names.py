"""Check names come from one enum (services.schema.CheckName): the static rules' registry, the docs' tables and
the code that records checks all agree with it, so a typo or a rule without a name fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from services.schema import Check, CheckName
from services.static import RULES

ROOT = Path(__file__).resolve().parents[2]
STATIC = {name for name in CheckName if name.startswith("static_")}


def test_every_static_rule_has_a_check_name_and_every_static_name_a_rule():
    assert {CheckName.static(code) for code in RULES} == STATIC


def test_an_unknown_name_is_refused():
    with pytest.raises(ValueError):
        CheckName.static("no_such_rule")
    with pytest.raises(ValueError):
        Check(name="outputs_matched", passed=True)


def test_a_check_name_is_a_plain_string_in_json():
    assert Check(name=CheckName.TIME_LIMIT, passed=False).model_dump(mode="json")["name"] == "time_limit"
    assert Check.model_json_schema()["properties"]["name"] == {"title": "Name", "type": "string"}


def _documented() -> set[str]:
    """The codes in the first column of docs/security.md's tables of defences and of auditable verdicts."""
    text = (ROOT / "docs" / "security.md").read_text()
    codes: set[str] = set()
    for title in ("## Defences", "## Auditable verdicts"):
        section = text.split(title, 1)[1].split("\n## ", 1)[0]
        for line in section.splitlines():
            if line.startswith("| `"):
                codes |= set(
                    re.findall(r"`([a-z_<>]+)`", line.split("|")[1].split("(")[0])
                )  # not "(verdict `timeout`)"
    return codes


def test_docs_tables_name_every_check_and_only_checks():
    documented = _documented()
    assert "static_<rule>" in documented, "the static rules' row"
    named = {str(name) for name in CheckName} - {str(name) for name in STATIC}
    assert named - documented == set(), "checks missing from docs/security.md's tables"
    assert documented - named - {"static_<rule>"} == set(), "docs/security.md names checks the enum does not have"


def _literal_names(path: Path) -> list[str]:
    """`record.check("name", ...)`, `fail("name", ...)`, `stand_down(...)`, `Violation(...)`, `Check(name=...)` with
    a string literal for the name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if called not in ("check", "fail", "stand_down", "Violation", "Check"):
            continue
        name = next((k.value for k in node.keywords if k.arg in ("name", "code")), node.args[0] if node.args else None)
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name.value!r}")
    return found


def test_the_core_names_checks_by_enum_member_never_by_string():
    paths = [p for p in sorted((ROOT / "services").rglob("*.py")) if "bundled" not in p.parts]
    assert [hit for p in paths for hit in _literal_names(p)] == []
