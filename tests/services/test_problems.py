"""Problem sets laid out like KernelBench, single reference files, and the bundled examples."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from services.problems import (
    Problem,
    ProblemError,
    ProblemSet,
    bundled_kernel,
    bundled_problems,
    check_reference_source,
    load_problem_file,
)

VALID = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
"""


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "KernelBench"
    (root / "level1").mkdir(parents=True)
    (root / "level2").mkdir()
    (root / "level1" / "19_ReLU.py").write_text(VALID)
    (root / "level1" / "2_Other.py").write_text(VALID)
    (root / "level1" / "_helpers.py").write_text(VALID)
    (root / "level1" / "__init__.py").write_text("")
    (root / "level1" / "notes.txt").write_text("not a problem")
    (root / "level2" / "3_Fused.py").write_text(VALID)
    (root / "top.py").write_text(VALID)
    return root


# ProblemSet


def test_ids_are_relative_paths_without_suffix_and_skip_underscore_files(kb):
    assert ProblemSet(kb).ids() == ["level1/19_ReLU", "level1/2_Other", "level2/3_Fused", "top"]


def test_load_by_id(kb):
    p = ProblemSet(kb).load("level1/19_ReLU")
    assert isinstance(p, Problem)
    assert p.id == "level1/19_ReLU"
    assert p.name == "19_ReLU"
    assert p.source == VALID
    assert p.path == (kb / "level1" / "19_ReLU.py").resolve()


def test_top_level_problem_name_is_its_id(kb):
    p = ProblemSet(kb).load("top")
    assert (p.id, p.name) == ("top", "top")


def test_ids_accept_a_string_root(kb):
    assert ProblemSet(str(kb)).ids() == ProblemSet(kb).ids()


@pytest.mark.parametrize("bad", ["level1/404_Missing", "level1/19_relu", "level1/19_ReLU.py", "level3/1_X", ""])
def test_unknown_id_raises(kb, bad):
    with pytest.raises(ProblemError, match=re.escape(f"unknown problem id {bad!r}")):
        ProblemSet(kb).load(bad)


def test_path_traversal_out_of_the_set_raises(kb):
    (kb.parent / "x.py").write_text(VALID)  # a valid problem, but outside the set
    with pytest.raises(ProblemError, match=re.escape("unknown problem id '../x'")):
        ProblemSet(kb).load("../x")
    with pytest.raises(ProblemError, match="unknown problem id"):
        ProblemSet(kb / "level1").load("../top")


def test_absolute_path_as_id_raises(kb):
    outside = kb.parent / "abs.py"
    outside.write_text(VALID)
    with pytest.raises(ProblemError, match="unknown problem id"):
        ProblemSet(kb).load(str(outside.with_suffix("")))


def test_dotdot_that_stays_inside_the_set_is_allowed(kb):
    p = ProblemSet(kb).load("level2/../level1/19_ReLU")
    assert p.path == (kb / "level1" / "19_ReLU.py").resolve()


def test_missing_problem_directory_raises(tmp_path):
    with pytest.raises(ProblemError, match="no such problem directory"):
        ProblemSet(tmp_path / "nope")


def test_problem_file_with_bad_source_raises_when_loaded_by_id(kb):
    (kb / "level1" / "9_Broken.py").write_text("def get_inputs(:\n")
    assert "level1/9_Broken" in ProblemSet(kb).ids()
    with pytest.raises(ProblemError, match="not valid Python"):
        ProblemSet(kb).load("level1/9_Broken")


# load_problem_file / check_reference_source


def test_load_problem_file_defaults_the_id_to_the_stem(tmp_path):
    f = tmp_path / "19_ReLU.py"
    f.write_text(VALID)
    p = load_problem_file(f)
    assert (p.id, p.name, p.source, p.path) == ("19_ReLU", "19_ReLU", VALID, f)
    assert load_problem_file(str(f), "level1/19_ReLU").id == "level1/19_ReLU"


def test_load_problem_file_missing_file(tmp_path):
    missing = tmp_path / "missing.py"
    with pytest.raises(ProblemError, match=re.escape(f"no such reference file: {missing}")):
        load_problem_file(missing)


def test_load_problem_file_on_a_directory_is_missing_file(tmp_path):
    with pytest.raises(ProblemError, match="no such reference file"):
        load_problem_file(tmp_path)


def test_load_problem_file_syntax_error_names_file_and_line(tmp_path):
    f = tmp_path / "bad.py"
    f.write_text("import torch\n\nclass Model(:\n    pass\n")
    with pytest.raises(ProblemError, match=r"bad\.py: reference is not valid Python \(.*, line 3\)"):
        load_problem_file(f)


def test_load_problem_file_missing_get_inputs(tmp_path):
    f = tmp_path / "no_inputs.py"
    f.write_text(VALID.replace("def get_inputs():", "def make_inputs():"))
    with pytest.raises(ProblemError, match=re.escape("no_inputs.py: reference must define get_inputs at module level")):
        load_problem_file(f)


def test_missing_names_are_all_listed():
    with pytest.raises(ProblemError, match="reference must define Model, get_inputs, get_init_inputs at module level"):
        check_reference_source("import torch\n", "ref.py")


def test_names_nested_in_a_class_or_function_do_not_count():
    source = "class Model: pass\ndef get_init_inputs(): return []\ndef outer():\n    def get_inputs(): return []\n"
    with pytest.raises(ProblemError, match="must define get_inputs at"):
        check_reference_source(source, "ref.py")


def test_problem_error_is_a_value_error():
    assert issubclass(ProblemError, ValueError)


# bundled problems and kernels


def test_bundled_problems_cover_level1_and_level2():
    ids = bundled_problems().ids()
    assert len(ids) >= 8
    assert "level1/1_ReLU" in ids
    assert any(i.startswith("level1/") for i in ids)
    assert any(i.startswith("level2/") for i in ids)


def test_every_bundled_problem_loads():
    problems = bundled_problems()
    for pid in problems.ids():
        p = problems.load(pid)
        assert p.id == pid
        assert "class Model" in p.source


def test_every_bundled_problem_has_a_kernel_defining_model_new():
    for pid in bundled_problems().ids():
        path = bundled_kernel(pid)
        assert path.is_file()
        tree = ast.parse(path.read_text(), filename=str(path))
        classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        assert "ModelNew" in classes, pid


def test_bundled_kernel_for_unknown_problem_raises():
    with pytest.raises(ProblemError, match="no bundled kernel for 'level1/404_Missing'"):
        bundled_kernel("level1/404_Missing")
