"""Parent-side judgement of defence evidence, and the child-side guards, as plain functions."""

from __future__ import annotations

import os

import pytest
import torch

from services.child import guards
from services.child import runtime as child_runtime
from services.hardware import peaks, roofline_floor_ms
from services.parent import evidence
from services.protocol.messages import Timed, decode_reply


def test_clean_reply_has_no_violations():
    assert evidence.guard_violations(Timed(tampered=[], flags_changed={}, violations=[], unstable=False)) == []


def test_a_reply_without_the_guard_report_is_a_replaced_reply_path(tmp_path):
    forged = {"ok": True, "nonce": "n", "seq": 3, "ms": 0.001, "structure": {}, "launches": [], "unstable": False}
    assert [v.code for v in evidence.guard_violations(decode_reply(Timed, forged))] == ["harness_integrity"]
    runtime = child_runtime.Runtime.__new__(child_runtime.Runtime)
    runtime.integrity = child_runtime.harness_integrity()
    runtime.snapshot, runtime.flags = runtime.integrity.snapshot(), guards.numeric_flags()
    runtime.audit = guards.AuditGuard(str(tmp_path))
    honest = decode_reply(Timed, {**forged, **runtime.guard_report()})
    assert evidence.guard_violations(honest) == []


def test_each_guard_report_maps_to_its_check_code():
    reply = Timed(
        violations=["write to /etc/x outside the private directory"],
        tampered=["time.perf_counter"],
        flags_changed={"cuda.matmul.allow_tf32": [False, True]},
        unstable=True,
    )
    codes = [v.code for v in evidence.guard_violations(reply)]
    assert codes == ["sandbox_violation", "harness_integrity", "numeric_flags", "output_stable_after_return"]
    feedback = " ".join(v.feedback for v in evidence.guard_violations(reply))
    assert "time.perf_counter" in feedback and "allow_tf32" in feedback


def test_missing_launches_counts_calls_without_a_custom_kernel():
    launches = [{"_relu": 1}, {}, {"_relu": 2}, {}]
    assert evidence.missing_launches(launches) == 2
    assert evidence.launched_names(launches) == {"_relu"}
    assert evidence.missing_launches([]) == 0


def test_coverage_is_custom_gpu_time_over_all_gpu_time():
    kernels = [
        ["_relu_kernel", 30.0, 3],
        ["void at::native::vectorized_elementwise_kernel", 60.0, 3],
        ["Memcpy DtoD (Device -> Device)", 10.0, 1],
    ]
    summary = evidence.coverage(kernels, {"_relu_kernel"}, 3)
    assert summary.coverage == pytest.approx(0.3)
    assert summary.top_kernels[0].name.startswith("void at::native")
    assert [k.custom for k in summary.top_kernels] == [False, True, False]
    assert sum(k.share for k in summary.top_kernels) == pytest.approx(1.0)


def test_coverage_matches_signature_suffixed_triton_names():
    summary = evidence.coverage([["_relu_kernel_0d1d2d", 5.0, 1]], {"_relu_kernel"}, 1)
    assert summary.coverage == 1.0


def test_coverage_of_an_empty_profile_is_zero():
    assert evidence.coverage([], {"_k"}, 1).coverage == 0.0


def test_roofline_floor_uses_the_fastest_datasheet_peaks():
    bandwidth, flops = peaks("NVIDIA H100 80GB HBM3")
    assert bandwidth == 3.35e12 and flops == 1.979e15
    assert roofline_floor_ms("NVIDIA H100 80GB HBM3", 3.35e9, 0) == pytest.approx(1.0)
    assert roofline_floor_ms("NVIDIA H200", 0, 1.979e12) == pytest.approx(1.0)
    assert roofline_floor_ms("Some Future GPU", 1e9, 1e12) is None


def test_roofline_rejects_a_time_below_the_floor():
    # 6.4 GB in and out on an H200 cannot take less than ~2.7 ms.
    ok, detail = evidence.roofline_detail("NVIDIA H200", 6_442_450_944, 6_442_450_944, 0.0, 3.0, 0.01, 0.9)
    assert not ok and "floor" in detail
    ok, _ = evidence.roofline_detail("NVIDIA H200", 6_442_450_944, 6_442_450_944, 0.0, 3.0, 3.1, 0.9)
    assert ok


def test_roofline_counts_outputs_only_when_the_reference_beats_the_input_floor():
    # The reference reads a tenth of its input: the floor must not count all input bytes.
    ok, _ = evidence.roofline_detail("NVIDIA H200", 4_800_000_000, 4_800, 0.0, 0.1, 0.1, 0.9)
    assert ok


def test_unknown_gpu_skips_the_floor():
    ok, detail = evidence.roofline_detail("Mystery GPU", 10**9, 10**9, 0.0, 1.0, 1e-6, 0.9)
    assert ok and "no datasheet peaks" in detail


def test_integrity_snapshot_sees_a_replaced_function_and_a_swapped_code_object(monkeypatch):
    snapshot = child_runtime.harness_integrity().snapshot

    before = snapshot()
    assert guards.changed(before, snapshot()) == []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    assert "torch.cuda.synchronize" in guards.changed(before, snapshot())
    monkeypatch.undo()
    monkeypatch.setattr(child_runtime.Runtime, "__getattribute__", object.__getattribute__, raising=False)
    assert guards.changed(before, snapshot()) == ["services.child.runtime.Runtime.__getattribute__"]
    monkeypatch.undo()
    monkeypatch.setattr(torch.profiler.profile, "events", lambda self: [])  # what coverage is computed from
    assert guards.changed(before, snapshot()) == ["torch.profiler.profiler.profile.events"]
    monkeypatch.undo()

    original = child_runtime.seed_everything.__code__
    try:
        child_runtime.seed_everything.__code__ = (lambda seed: None).__code__
        assert "services.child.runtime.seed_everything" in guards.changed(before, snapshot())
    finally:
        child_runtime.seed_everything.__code__ = original


def test_numeric_flags_change_is_visible():
    before = guards.numeric_flags()
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        after = guards.numeric_flags()
    finally:
        torch.set_float32_matmul_precision(previous)
    assert before["float32_matmul_precision"] != after["float32_matmul_precision"]


@pytest.fixture
def audit(tmp_path):
    guard = guards.AuditGuard(str(tmp_path))
    guard.active = True
    return guard


def test_audit_allows_writes_inside_the_private_directory(audit, tmp_path):
    audit._hook("open", (str(tmp_path / "x.txt"), "w", 0))
    audit._hook("open", ("/etc/hostname", "r", os.O_RDONLY))
    audit._hook("open", ("/dev/null", "w", 0))
    assert audit.take() == []


@pytest.mark.parametrize(
    ("event", "args", "expect"),
    [
        ("open", ("/tmp/kernelgym_pwned", "w", 0), "write to /tmp/kernelgym_pwned"),
        ("open", ("/tmp/x", None, os.O_WRONLY | os.O_CREAT), "outside the private directory"),
        ("os.remove", ("/etc/passwd", -1), "os.remove"),
        ("os.rename", ("inside", "/tmp/elsewhere", -1, -1), "os.rename"),
        ("socket.__new__", (None, 2, 1, 0), "network socket"),
        ("socket.connect", (None, ("1.1.1.1", 53)), "network access"),
        ("subprocess.Popen", ("pip", ["pip", "install", "x"], None, None), "spawning a process (pip)"),
        ("os.system", (b"ls",), "spawning a process"),
        ("os.fork", (), "spawning a process"),
        ("os.kill", (1, 9), "signalling another process"),
    ],
)
def test_audit_denies_and_records(audit, event, args, expect):
    with pytest.raises(PermissionError):
        audit._hook(event, args)
    assert expect in audit.take()[0]


@pytest.mark.parametrize(
    "exe", ["/usr/local/cuda/bin/ptxas", "/usr/bin/x86_64-linux-gnu-gcc", "gcc", "ptxas-blackwell", "file"]
)
def test_audit_lets_tritons_toolchain_run(audit, exe):
    audit._hook("subprocess.Popen", (exe, [exe, "-v"], None, None))
    assert audit.take() == []


def test_audit_lets_the_toolchain_run_through_posix_spawn(audit):
    """Triton runs ptxas with close_fds=False, which CPython turns into os.posix_spawn after the Popen event."""
    exe = "/usr/local/cuda/bin/ptxas"
    audit._hook("subprocess.Popen", (exe, [exe, "--version"], None, None))
    audit._hook("os.posix_spawn", (exe, [exe, "--version"], {}))
    assert audit.take() == []


@pytest.mark.parametrize("event", ["subprocess.Popen", "os.posix_spawn", "os.exec"])
def test_audit_denies_a_toolchain_name_in_the_private_directory(audit, tmp_path, event):
    fake = str(tmp_path / "ptxas")
    with pytest.raises(PermissionError):
        audit._hook(event, (fake, [fake], None, None))
    assert "spawning a process (ptxas)" in audit.take()[0]


def test_unix_sockets_are_allowed(audit):
    audit._hook("socket.__new__", (None, 1, 1, 0))  # AF_UNIX
    assert audit.take() == []


def test_rmdir_outside_is_refused_without_a_violation(audit, tmp_path):
    """Triton's cache calls os.removedirs, which climbs past the private directory: refuse, don't blame."""
    with pytest.raises(PermissionError):
        audit._hook("os.rmdir", ("/tmp", -1))
    audit._hook("os.rmdir", (str(tmp_path / "sub"), -1))
    assert audit.take() == []


def test_os_removedirs_inside_the_private_directory_records_nothing(tmp_path):
    """The real call, under the real hook (installed for this process only while active)."""
    guard = guards.AuditGuard(str(tmp_path))
    leaf = tmp_path / "cache" / "tmp.pid_1"
    leaf.mkdir(parents=True)
    guard.install()
    try:
        os.removedirs(leaf)
    finally:
        guard.active = False
    assert guard.take() == []
    assert not (tmp_path / "cache").exists()


class _Graph:
    """Stands in for torch.cuda.CUDAGraph, whose capture needs a GPU (tests/services/test_gpu.py runs the real one)."""

    def capture_begin(self) -> None:
        pass

    def capture_end(self) -> None:
        pass

    def replay(self) -> None:
        pass


def test_graph_replay_counts_the_kernels_captured_in_it():
    recorder = guards.LaunchRecorder()
    recorder._wrap_graphs(_Graph)
    graph, other = _Graph(), _Graph()
    graph.capture_begin()
    recorder.counts["_relu"] += 1  # what the wrapped JITFunction.run records during the capture
    graph.capture_end()
    assert recorder.take() == {"_relu": 1}
    graph.replay()
    graph.replay()
    other.capture_begin()
    other.capture_end()
    other.replay()
    assert recorder.take() == {"_relu": 2}


def test_coverage_is_unmeasured_only_where_the_profiler_missed_counted_launches_outside_strict():
    assert evidence.launch_count([{"_copy": 2}, {"_copy": 1, "_add": 3}]) == 6
    assert evidence.coverage_unmeasured(0.0, 3, "default")
    assert not evidence.coverage_unmeasured(0.0, 0, "default")  # nothing launched: a real 0
    assert not evidence.coverage_unmeasured(0.0001, 3, "default")  # the profiler saw them
    assert not evidence.coverage_unmeasured(0.0, 3, "strict")  # flooding the profiler gets past no rule
