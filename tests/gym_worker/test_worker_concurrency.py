"""How many evaluations a worker keeps in flight: the setting when given, else its default bounded by the host's
cores and the GPU's memory (read from nvidia-smi; here a stand-in executable on PATH)."""

from __future__ import annotations

import os

import pytest

from gym_common.settings import ServiceSettings
from gym_worker.run import CORES_PER_EVALUATION, claim_device, concurrency, gpu_memory_mb


@pytest.fixture
def nvidia_smi(tmp_path, monkeypatch):
    """An `nvidia-smi` that reports a GPU of the given memory (MB), first on PATH."""

    def install(total_mb: int) -> None:
        exe = tmp_path / "nvidia-smi"
        exe.write_text(f"#!/bin/sh\necho {total_mb}\n")
        exe.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")

    return install


def test_an_explicit_setting_is_used_as_given():
    assert concurrency(ServiceSettings(worker_concurrency=5), "cuda", 0) == 5


def test_the_default_is_bounded_by_the_cores(monkeypatch):
    monkeypatch.delenv("KERNELGYM_WORKER_CONCURRENCY", raising=False)
    cores = len(os.sched_getaffinity(0))
    n = concurrency(ServiceSettings(), "cpu", None)
    assert n == min(ServiceSettings().worker_concurrency, max(1, cores // CORES_PER_EVALUATION))


def test_the_default_is_bounded_by_the_gpu_memory(nvidia_smi, monkeypatch):
    monkeypatch.delenv("KERNELGYM_WORKER_CONCURRENCY", raising=False)
    nvidia_smi(81559)
    assert gpu_memory_mb(0) == 81559
    settings = ServiceSettings(worker_gpu_memory_mb=40000)
    assert concurrency(settings, "cuda", 0) <= 2
    nvidia_smi(4096)  # less than one evaluation's share: still one
    assert concurrency(ServiceSettings(), "cuda", 0) == 1


def test_a_second_worker_for_one_gpu_is_refused_with_the_first_ones_pid(tmp_path):
    first = claim_device(str(tmp_path), "gpu-A", wait_s=0)
    try:
        with pytest.raises(SystemExit, match=rf"another worker \(pid {os.getpid()}\) already serves gpu-A"):
            claim_device(str(tmp_path), "gpu-A", wait_s=0)
        os.close(claim_device(str(tmp_path), "gpu-B", wait_s=0))  # another GPU of the host
    finally:
        os.close(first)
    os.close(claim_device(str(tmp_path), "gpu-A", wait_s=0))  # free again once the first worker is gone
