"""Independent checker for the real-world corpus: decides each case's verdict without the evaluator.

    python tests/realworld/check.py [--device cpu|cuda] [--json OUT] [NAME ...]

Each case runs in a fresh subprocess, the way a user would try a kernel by hand: import the reference and the
candidate, build `Model` and `ModelNew` from the same seed, and for three input seeds call the reference on one copy
of the inputs and the candidate on another (generated again from the same seed), then compare outputs with
`torch.isclose` (atol = rtol = 1e-4 for fp32, 1e-2 for fp16/bf16; NaN only where the reference has NaN) and
compare the two copies of the inputs afterwards (an in-place reference must be matched in place). An exception is
`compile_error` when Triton's CompilationError is in its chain, else `runtime_error`; a shape, dtype or value
difference is `incorrect`; a case that takes longer than --timeout seconds is `timeout`.

No part of the evaluator is used: no child protocol, no defences, no comparison code of the project. On a GPU
nothing of the project is imported at all. On CPU the checker needs what the evaluator's CPU children have - the
Triton interpreter plus `services.devices.enable_cpu_redirect` (CUDA placements land on the CPU, and the
interpreter shims of `services.child.interpreter_shims`) - because the candidates are GPU code. `--bare` leaves the
shims out, to measure what they change.

It prints one line per case and the agreement with the verdicts the case files expect (`expect:`, or `cpu:`
where the file documents an interpreter limit); the exit status is 0 when all agree.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TRIALS = (11, 12, 13)
INIT_SEED = 7


def _seed(seed: int) -> None:
    import numpy as np
    import torch

    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def _import(directory: Path, name: str, source: str):
    path = directory / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _classify(exc: BaseException) -> str:
    seen: BaseException | None = exc
    while seen is not None:
        if any(c.__name__ == "CompilationError" for c in type(seen).__mro__):
            return "compile_error"
        seen = seen.__cause__ or seen.__context__
    return "runtime_error"


def _tensors(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    return []


def _mismatch(ref, cand, what: str) -> str | None:
    import torch

    refs, cands = _tensors(ref), _tensors(cand)
    if len(refs) != len(cands):
        return f"{what}: {len(cands)} tensors, the reference has {len(refs)}"
    for i, (r, c) in enumerate(zip(refs, cands, strict=True)):
        if r.shape != c.shape or r.dtype != c.dtype:
            return f"{what}[{i}]: {c.dtype} {tuple(c.shape)}, the reference {r.dtype} {tuple(r.shape)}"
        tol = 1e-2 if r.dtype in (torch.float16, torch.bfloat16) else 1e-4
        rf, cf = r.detach().double().cpu(), c.detach().double().cpu()
        ok = torch.isclose(cf, rf, atol=tol, rtol=tol, equal_nan=True)
        if not bool(ok.all()):
            bad = int((~ok).sum())
            err = float((cf - rf).abs().nan_to_num(float("inf")).max())
            return f"{what}[{i}]: {bad}/{r.numel()} elements differ (max abs error {err:.3g}, tol {tol:g})"
    return None


def run_one(name: str, device: str, bare: bool = False) -> dict:
    """In the case's own process: the verdict of one case."""
    sys.path.insert(0, str(HERE))
    from corpus import CASES_DIR, parse_case

    case = parse_case(CASES_DIR / f"{name}.py")
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
        sys.path.insert(0, str(ROOT))
        from services.devices import enable_cpu_redirect

        enable_cpu_redirect(shims=not bare)
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        ref_mod = _import(Path(tmp), "kg_reference", case.reference)
        try:
            cand_mod = _import(Path(tmp), "kg_candidate", case.candidate)
        except Exception as exc:
            return {"verdict": _classify(exc), "detail": "".join(traceback.format_exception_only(exc)).strip()}
        _seed(INIT_SEED)
        init = ref_mod.get_init_inputs()
        _seed(INIT_SEED)
        model = ref_mod.Model(*init).to(device)
        try:
            _seed(INIT_SEED)
            cand = cand_mod.ModelNew(*init).to(device)
        except Exception as exc:
            return {"verdict": _classify(exc), "detail": "".join(traceback.format_exception_only(exc)).strip()}

        def inputs(seed: int) -> list:
            _seed(seed)
            with torch.device(device):
                values = ref_mod.get_inputs()
            return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]

        for seed in TRIALS:
            ref_in, cand_in = inputs(seed), inputs(seed)
            with torch.no_grad():
                ref_out = model(*ref_in)
                try:
                    cand_out = cand(*cand_in)
                    if device == "cuda":
                        torch.cuda.synchronize()
                except Exception as exc:
                    detail = "".join(traceback.format_exception_only(exc)).strip()
                    return {"verdict": _classify(exc), "detail": detail[-400:]}
            why = _mismatch(ref_out, cand_out, "output") or _mismatch(ref_in, cand_in, "inputs after the call")
            if why:
                return {"verdict": "incorrect", "detail": f"seed {seed}: {why}"}
    return {"verdict": "passed", "detail": f"{len(TRIALS)} trials"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="case names (default: all)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--json", help="write the verdicts here")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument(
        "--bare", action="store_true", help="CPU: the interpreter without services.child.interpreter_shims"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.device, args.bare)))
        return 0

    sys.path.insert(0, str(HERE))
    from corpus import load_cases

    cases = [c for c in load_cases() if not args.names or c.name in args.names]
    rows, agree = [], 0
    for case in cases:
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, __file__, "--one", case.name, "--device", args.device] + ["--bare"] * args.bare,
                capture_output=True,
                text=True,
                timeout=args.timeout,
                cwd=ROOT,
            )
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if lines:
                got = json.loads(lines[-1])
            else:
                got = {"verdict": "crashed", "detail": f"exit {proc.returncode}: {proc.stderr[-400:]}"}
        except subprocess.TimeoutExpired:
            got = {"verdict": "timeout", "detail": f"over {args.timeout:g} s"}
        want = case.expected(args.device)
        ok = got["verdict"] == want
        agree += ok
        rows.append({"case": case.name, "expected": want, **got, "agrees": ok, "s": round(time.perf_counter() - t0, 1)})
        mark = "ok  " if ok else "DIFF"
        print(f"{mark} {case.name:38s} expected {want:14s} got {got['verdict']:14s} {got['detail'][:90]}", flush=True)
    print(f"checker on {args.device}: {agree}/{len(cases)} agree with the expected verdicts")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "agree": agree, "cases": rows}, indent=1))
    return 0 if agree == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
