"""Host memory safety of the evaluation children: the default resident limit comes from the host's memory and
the children that run at once, and the resource limits a child sets stay within the hard limits it inherits."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from services.sandbox import AS_HEADROOM_MB, child_limits
from services.settings import EvalSettings, host_memory_mb

ROOT = Path(__file__).resolve().parents[2]
RELU = "level1/1_ReLU"


@pytest.fixture
def no_limit_env(monkeypatch):
    for name in ("KERNELGYM_MEMORY_LIMIT_MB", "KERNELGYM_CONCURRENT_CHILDREN", "KERNELGYM_MAX_FILE_MB"):
        monkeypatch.delenv(name, raising=False)


def test_the_default_memory_limit_shares_three_quarters_of_the_host_among_concurrent_children(no_limit_env):
    host = host_memory_mb()
    physical = (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) >> 20
    assert 0 < host <= physical
    one_worker = EvalSettings()
    assert one_worker.concurrent_children == 2
    assert one_worker.memory_limit_mb == host * 3 // 4 // 2
    # The children that run at once, all at their limit, leave a quarter of the host to everything else.
    assert one_worker.memory_limit_mb * one_worker.concurrent_children <= host * 3 // 4
    assert EvalSettings(concurrent_children=8).memory_limit_mb == host * 3 // 4 // 8
    assert EvalSettings(memory_limit_mb=2048).memory_limit_mb == 2048


def test_a_workers_pool_sets_its_devices_evaluations_and_the_hosts_children_unless_the_environment_did(no_limit_env):
    host = host_memory_mb()
    pooled = EvalSettings().for_pool(in_flight=4, children_per_evaluation=3)
    assert (pooled.device_evaluations, pooled.concurrent_children) == (4, 12)
    assert pooled.memory_limit_mb == host * 3 // 4 // 12
    fixed = EvalSettings(concurrent_children=2, memory_limit_mb=2048).for_pool(in_flight=4, children_per_evaluation=3)
    assert (fixed.device_evaluations, fixed.concurrent_children, fixed.memory_limit_mb) == (4, 2, 2048)


@pytest.mark.parametrize(
    ("proc_cgroup", "files"),
    [
        ("0::/slurm/job_7/step_0\n", {"slurm/memory.max": "max", "slurm/job_7/memory.max": str(4 << 30)}),
        (
            "4:memory:/docker/abc\n3:cpu:/\n0::/\n",
            {"memory/docker/memory.limit_in_bytes": str(4 << 30), "memory/memory.limit_in_bytes": str(1 << 62)},
        ),
    ],
    ids=["v2", "v1"],
)
def test_the_host_memory_is_the_lowest_limit_of_this_process_cgroup_and_its_ancestors(tmp_path, proc_cgroup, files):
    """A limit set on a job's own cgroup (Slurm, a container), not only at the root, bounds the children."""
    (tmp_path / "cgroup").write_text(proc_cgroup)
    for name, value in files.items():
        (tmp_path / "fs" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "fs" / name).write_text(value + "\n")
    assert host_memory_mb(tmp_path / "cgroup", tmp_path / "fs") == min(4096, host_memory_mb(tmp_path / "none"))


def test_child_limits_stay_within_the_inherited_hard_limits(no_limit_env):
    settings = EvalSettings(memory_limit_mb=4096, max_file_mb=1024)
    as_hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    fsize_hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    mem_mb, file_mb = child_limits("cpu", settings)
    if as_hard == resource.RLIM_INFINITY:
        assert mem_mb == 4096
    else:
        assert mem_mb == 0 or (mem_mb + AS_HEADROOM_MB) << 20 <= as_hard
    assert file_mb == 1024 or (fsize_hard != resource.RLIM_INFINITY and file_mb << 20 <= fsize_hard)
    assert child_limits("cuda", settings)[0] == 0


def test_a_cpu_evaluation_runs_under_inherited_hard_limits():
    """What Slurm or a container does: hard limits on address space (below the child's backstop) and file
    size (below KERNELGYM_MAX_FILE_MB). Every child used to fail to start ('not allowed to raise maximum
    limit')."""
    as_kib, fsize_kib = 20 * 1024 * 1024, 512 * 1024
    evaluate = [
        sys.executable,
        "-m",
        "kernelgym",
        "eval",
        "--reference",
        f"services/bundled/problems/{RELU}.py",
        "--candidate",
        f"services/bundled/kernels/{RELU}.py",
        "--device",
        "cpu",
        "--no-timing",
        "--json",
    ]
    command = f"ulimit -v {as_kib} && ulimit -f {fsize_kib} && exec " + " ".join(evaluate)
    done = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["verdict"] == "passed"
