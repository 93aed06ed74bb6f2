"""Feedback text for an LLM agent: trimmed tracebacks, mismatch and timing messages."""

from __future__ import annotations

from services.compare import Comparison
from services.feedback import cap, mismatch, signal_hint, timing, trim_traceback
from services.schema import RuntimeStats

TMP = "/tmp/kernelgym-abc123"

TRACEBACK = f"""Traceback (most recent call last):
  File "/work/main/services/child_runtime.py", line 140, in run
    out = self.model(*inputs)
          ^^^^^^^^^^^^^^^^^^^
  File "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1751, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "{TMP}/kg_candidate.py", line 31, in forward
    return helper(x)
  File "{TMP}/kg_candidate.py", line 12, in helper
    raise RuntimeError("bad block size")
RuntimeError: bad block size
"""


def test_trim_traceback_keeps_candidate_frames_and_the_exception():
    assert trim_traceback(TRACEBACK, TMP) == (
        "Traceback (most recent call last):\n"
        '  File "kg_candidate.py", line 31, in forward\n'
        "    return helper(x)\n"
        '  File "kg_candidate.py", line 12, in helper\n'
        '    raise RuntimeError("bad block size")\n'
        "RuntimeError: bad block size"
    )


def test_trim_traceback_drops_harness_frames_and_their_code_lines():
    out = trim_traceback(TRACEBACK, TMP)
    assert "child_runtime.py" not in out
    assert "self.model(*inputs)" not in out
    assert "^^^" not in out
    assert "module.py" not in out
    assert "_call_impl" not in out


def test_trim_traceback_strips_the_tmpdir_prefix():
    assert TMP not in trim_traceback(TRACEBACK, TMP)
    # Without a tmpdir the full path stays.
    assert f'File "{TMP}/kg_candidate.py", line 31' in trim_traceback(TRACEBACK)


def test_trim_traceback_keeps_reference_frames():
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/srv/harness.py", line 1, in main\n'
        "    run()\n"
        f'  File "{TMP}/kg_reference.py", line 9, in get_inputs\n'
        '    return [torch.randn(4, device="cuda")]\n'
        "AssertionError: Torch not compiled with CUDA enabled\n"
    )
    assert trim_traceback(tb, TMP) == (
        "Traceback (most recent call last):\n"
        '  File "kg_reference.py", line 9, in get_inputs\n'
        '    return [torch.randn(4, device="cuda")]\n'
        "AssertionError: Torch not compiled with CUDA enabled"
    )


def test_trim_traceback_keeps_chained_exception_text_and_collapses_blank_runs():
    tb = (
        "Traceback (most recent call last):\n"
        f'  File "{TMP}/kg_candidate.py", line 5, in forward\n'
        "    x = y\n"
        "NameError: name 'y' is not defined\n"
        "\n"
        "\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/harness.py", line 1, in main\n'
        "    run()\n"
        "ValueError: wrapped\n"
    )
    assert trim_traceback(tb, TMP) == (
        "Traceback (most recent call last):\n"
        '  File "kg_candidate.py", line 5, in forward\n'
        "    x = y\n"
        "NameError: name 'y' is not defined\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        "ValueError: wrapped"
    )


def test_trim_traceback_of_empty_text_is_empty():
    assert trim_traceback("", TMP) == ""


def test_trim_traceback_caps_long_text_keeping_the_end():
    tb = "Traceback (most recent call last):\n" + "ValueError: " + "x" * 3000 + "END"
    out = trim_traceback(tb)
    assert len(out) == 2501
    assert out.startswith("…")
    assert out.endswith("xEND")


def test_cap_leaves_short_text_alone():
    assert cap("abcdef", 10) == "abcdef"
    assert cap("abcdef", 6) == "abcdef"


def test_cap_cuts_to_exactly_the_limit_with_an_ellipsis():
    out = cap("abcdefghij", 5)
    assert out == "abcd…"
    assert len(out) == 5
    assert len(cap("y" * 10_000, 4000)) == 4000


def _cmp() -> Comparison:
    return Comparison(
        ok=False,
        reason="3 of 10 values (atol=0.0001, rtol=0.0001) differ (30.00%)",
        max_abs_error=0.00123,
        max_rel_error=0.5,
        mismatched=3,
        total=10,
    )


def test_mismatch_reports_trial_reason_and_errors():
    assert mismatch(0, 5, _cmp(), False) == (
        "Output mismatch on correctness trial 1/5: 3 of 10 values (atol=0.0001, rtol=0.0001) differ (30.00%). "
        "Max absolute error 0.00123, max relative error 0.5."
    )


def test_mismatch_without_tf32_suspicion_does_not_mention_tf32():
    text = mismatch(2, 3, _cmp(), False)
    assert "trial 3/3" in text
    assert "TF32" not in text
    assert "input_precision" not in text


def test_mismatch_with_tf32_suspicion_suggests_ieee_precision():
    text = mismatch(0, 5, _cmp(), True)
    assert "TF32" in text
    assert 'input_precision="ieee"' in text
    assert "tl.dot" in text
    assert text.startswith("Output mismatch on correctness trial 1/5:")


def test_signal_hint():
    assert "out-of-bounds" in signal_hint("SIGSEGV")
    assert "resource limit" in signal_hint("SIGKILL")
    assert signal_hint("SIGTERM") == ""
    assert signal_hint(None) == ""


def test_timing_message():
    def stats(median: float, trials: int) -> RuntimeStats:
        return RuntimeStats(
            median_ms=median,
            iqr_ms=0.0123,
            mean_ms=median,
            min_ms=median,
            trials=trials,
            ci95_low_ms=median,
            ci95_high_ms=median,
            ci95_rel_halfwidth=0.0,
        )

    text = timing(stats(0.123456, 200), stats(0.25, 180), 0.25 / 0.123456)
    assert text == (
        "Candidate median 0.1235 ms (IQR 0.012, n=200) vs PyTorch reference 0.25 ms (n=180): speedup 2.025x."
    )
