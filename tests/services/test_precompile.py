"""The compiler child (#13): a candidate's Triton kernels compiled for a GPU in a process that sees none, before the
first call, and copied into the candidate child's cache. Real child processes and Triton's real compiler (for an
sm_90 target; its ptxas ships with Triton), on a machine without a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import AUTOTUNED, TUNED_BODY, bundled_source, relu_candidate

from services.evaluation import PrecompileOutcome
from services.parent.link import Link
from services.parent.precompile import begin_precompile, finish_precompile
from services.parent.record import Record
from services.problems import Problem
from services.sandbox import ChildPool, copy_cache
from services.schema import EvalOptions
from services.settings import EvalSettings

SETTINGS = EvalSettings(precompile_timeout_s=20)


@pytest.fixture(scope="module")
def pool() -> Iterator[ChildPool]:
    pool = ChildPool(SETTINGS, size=1)
    pool.prewarm("compiler")
    yield pool
    pool.close()


def run_pass(pool: ChildPool, problem: Problem, candidate: str, tmp_path, settings=SETTINGS) -> PrecompileOutcome:
    link = Link(settings, EvalOptions(), "cuda", Record(settings.defences), lambda role: None)
    pending = begin_precompile(link, pool, problem, candidate, (9, 0))
    return finish_precompile(link, pending, str(tmp_path / "cache"))


def cubins(cache) -> list[str]:
    return [f for _, _, files in os.walk(cache) for f in files if f.endswith(".cubin")]


def test_each_launched_kernel_is_compiled_for_the_gpu_without_one(pool, problems, tmp_path):
    # The bundled RMSNorm wrapper reads shapes and strides and allocates with device=x.device: on meta inputs that
    # user code sees as cuda:0, it reaches its launch, which compiles for sm_90 instead of running.
    problem = problems.load("level1/5_RMSNorm")
    outcome = run_pass(pool, problem, bundled_source("level1/5_RMSNorm"), tmp_path)
    assert outcome.stopped == "" and outcome.kernels == 1
    assert outcome.copied_files > 0 and len(cubins(tmp_path / "cache")) == 1


def test_a_wrapper_that_asserts_cuda_inputs_and_synchronises_still_compiles(pool, relu, tmp_path):
    body = """assert x.is_cuda and x.device.type == 'cuda' and torch.cuda.is_available()
torch.cuda.synchronize()
with torch.cuda.device(x.device):
    y = triton_relu(x)
torch.cuda.synchronize()
return y"""
    outcome = run_pass(pool, relu, relu_candidate(body), tmp_path)
    assert outcome.stopped == "" and outcome.kernels == 1


def test_an_autotuned_kernel_compiles_every_config(pool, relu, tmp_path):
    outcome = run_pass(pool, relu, relu_candidate(TUNED_BODY, AUTOTUNED), tmp_path)
    assert outcome.stopped == "" and outcome.kernels == 12
    assert len(cubins(tmp_path / "cache")) == 12


def test_code_that_needs_values_ends_the_pass_and_keeps_what_it_compiled(pool, relu, tmp_path):
    body = "y = triton_relu(x)\nif y.sum().item() > 0:\n    return y\nreturn y"
    outcome = run_pass(pool, relu, relu_candidate(body), tmp_path)
    assert outcome.kernels == 1 and len(cubins(tmp_path / "cache")) == 1
    assert outcome.stopped.startswith("forward(): ") and "meta" in outcome.stopped.lower()


def test_a_pass_that_never_ends_is_cut_at_its_limit(pool, relu, tmp_path):
    settings = SETTINGS.model_copy(update={"precompile_timeout_s": 2.0})
    start = time.monotonic()
    outcome = run_pass(pool, relu, relu_candidate("y = triton_relu(x)\nwhile True:\n    pass"), tmp_path, settings)
    assert time.monotonic() - start < 10
    assert outcome.stopped == "not done within 2 s"
    assert len(cubins(tmp_path / "cache")) == 1  # compiled before the loop: kept


def test_a_candidate_that_does_not_import_reports_where_it_stopped(pool, relu, tmp_path):
    outcome = run_pass(pool, relu, "import torch\nraise ImportError('nope')\n", tmp_path)
    assert outcome.kernels == 0 and cubins(tmp_path / "cache") == []  # files Triton writes for itself may be copied
    assert outcome.stopped == "importing the candidate: ImportError: nope"


def test_copy_cache_copies_whole_entries_within_the_limit_and_nothing_else(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    for name, size in (("AAA", 10), ("BBB", 50), ("CCC", 10)):
        (src / name).mkdir(parents=True)
        (src / name / "k.cubin").write_bytes(b"x" * size)
        (src / name / "k.json").write_bytes(b"{}")
    (src / "AAA" / "link").symlink_to("/etc/hostname")  # not a regular file: never followed
    (src / "stray.txt").write_text("not an entry")
    (dst / "CCC").mkdir(parents=True)  # the candidate child's own: kept as it is
    assert copy_cache(str(src), str(dst), limit_bytes=40) == 2
    assert sorted(os.listdir(dst)) == ["AAA", "CCC"]  # BBB is over the limit
    assert sorted(os.listdir(dst / "AAA")) == ["k.cubin", "k.json"] and os.listdir(dst / "CCC") == []
    assert copy_cache(str(tmp_path / "missing"), str(dst), limit_bytes=40) == 0


PARITY = """
import os, sys, torch
sys.path.insert(0, sys.argv[1])
from services.child.compiler import _Pass
from services.child.interpreter_shims import install_device_view
from services.child.runtime import import_source
from services.devices import DeviceRedirect

counts = _Pass(libcuda=False)
counts.install((9, 0))
DeviceRedirect("cpu").__enter__()
install_device_view("cpu", (9, 0))
reference = import_source("kg_reference", open(sys.argv[2]).read())
candidate = import_source("kg_candidate", open(sys.argv[3]).read())
with torch.no_grad():
    candidate.ModelNew(*reference.get_init_inputs()).to("cuda")(*reference.get_inputs())
print(len(counts.compiled))
"""


@pytest.mark.parametrize("problem_id", ["level1/4_Softmax_rows", "level2/1_Linear_Bias_ReLU"])
def test_the_pass_compiles_the_entries_a_launch_on_real_tensors_looks_up(pool, problems, tmp_path, problem_id):
    # The pass sees meta tensors; a candidate child sees real ones. Triton keys its cache on the arguments'
    # specialisation (dtypes, 16-byte alignment, integer values), the options and the target: the same kernels
    # launched on real tensors of the published shapes, for the same GPU, must find every entry and compile nothing.
    problem = problems.load(problem_id)
    cache = tmp_path / "cache"
    outcome = run_pass(pool, problem, bundled_source(problem_id), tmp_path)
    assert outcome.stopped == "" and outcome.kernels >= 1
    entries = sorted(os.listdir(cache))
    (tmp_path / "ref.py").write_text(problem.source)
    (tmp_path / "cand.py").write_text(bundled_source(problem_id))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(cache), CUDA_VISIBLE_DEVICES="")
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", PARITY, root, str(tmp_path / "ref.py"), str(tmp_path / "cand.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) == outcome.kernels
    assert sorted(os.listdir(cache)) == entries  # every lookup was a hit: nothing new compiled
