"""OpenRLHF 0.11.2 with Dr. Kernel's turn-level TRLOO: `python -m rl_client.openrlhf_train <train_ppo_ray args>`.

OpenRLHF computes advantages in `RemoteExperienceMaker.compute_advantages_and_returns`, which runs in its trainer
Ray actor (`PPOTrainer`; `TrainingActor` with `--train.async_enable`), not in the process that parses the
arguments. So this entry point

1. takes `openrlhf.cli.train_ppo_ray`'s arguments plus the `--kernelgym.*` ones below, maps
   `--algo.advantage.estimator trloo` onto OpenRLHF's `rloo` (its checks, n_samples_per_prompt > 1 and no critic,
   are TRLOO's too) and writes the TRLOO settings to the environment variable KERNELGYM_RL_TRAINER;
2. starts Ray with a runtime environment that carries that variable and every other KERNELGYM_* variable (the
   agent's configuration) to all workers, and names `setup_worker` as their `worker_process_setup_hook`;
3. runs `openrlhf.cli.train_ppo_ray` as `__main__` with the rewritten arguments; its `train()` keeps the Ray
   session that is already up.

`setup_worker` runs in every Ray worker of the job (and here): once `openrlhf.trainer.ppo_utils.experience_maker`
is imported in that process, `RemoteExperienceMaker.compute_advantages_and_returns` is replaced by
`rl_client.openrlhf_trloo.compute_advantages_and_returns`, which computes TRLOO when KERNELGYM_RL_TRAINER asks for
it and calls OpenRLHF's own method otherwise. This module imports only the standard library and
`rl_client.settings` at the top, because every worker of the job imports it; `rl_client.openrlhf_trloo` is imported
only by the patch, and never imports this module.

`--kernelgym.*` arguments (defaults are Dr. Kernel's):
  --kernelgym.token_veto X     mask a whole turn when one of its tokens has π_train/π_rollout < X (1e-4; 0: off).
                               Needs vLLM's log-probs, i.e. --algo.advantage.is_correction_level token|seq.
  --kernelgym.no_prs           keep correct low-coverage turns (profiling-based rejection sampling is on by default)
  --kernelgym.prs_threshold X  coverage at or below which a correct turn is always rejected (0.3)
  --kernelgym.prs_ramp X       width of the linear ramp above the threshold (0.1)
  --kernelgym.no_failure_mask  keep "failure after success" turns in the loss and the baselines
  --kernelgym.dry_run          print the OpenRLHF arguments and the Ray runtime environment as JSON; start nothing
"""

from __future__ import annotations

import importlib.abc
import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from rl_client.settings import SETTINGS_ENV, RLSettings, TrainerSettings

EXPERIENCE_MAKER = "openrlhf.trainer.ppo_utils.experience_maker"
SETUP_HOOK = "rl_client.openrlhf_train.setup_worker"
ESTIMATOR_FLAG = "--algo.advantage.estimator"
# Our flags: name -> (settings field, value parser or the constant a bare flag sets).
_FLAGS: dict[str, tuple[str, Callable[[str], Any] | None, Any]] = {
    "--kernelgym.token_veto": ("token_veto", float, None),
    "--kernelgym.prs_threshold": ("prs_threshold", float, None),
    "--kernelgym.prs_ramp": ("prs_ramp", float, None),
    "--kernelgym.no_prs": ("prs", None, False),
    "--kernelgym.no_failure_mask": ("failure_mask", None, False),
}
DRY_RUN = "--kernelgym.dry_run"


@dataclass(frozen=True)
class Launch:
    openrlhf_argv: list[str]
    settings: TrainerSettings
    dry_run: bool = False


def rewrite_arguments(argv: list[str]) -> Launch:
    """Split off the `--kernelgym.*` arguments, map `trloo` onto `rloo`, and check what TRLOO needs from the rest.
    Raises ValueError with a message for the user."""
    rest: list[str] = []
    settings = TrainerSettings()
    dry_run = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if name == DRY_RUN:
            dry_run = True
        elif name in _FLAGS:
            field, parse, constant = _FLAGS[name]
            if parse is None:
                if eq:
                    raise ValueError(f"{name} takes no value")
                value = constant
            else:
                if not eq:
                    i += 1
                    if i >= len(argv):
                        raise ValueError(f"{name} needs a value")
                    inline = argv[i]
                try:
                    value = parse(inline)
                except ValueError:
                    raise ValueError(f"{name}: not a number: {inline!r}") from None
            settings = settings.model_copy(update={field: value})
        elif name.startswith("--kernelgym."):
            raise ValueError(f"unknown argument {name} (known: {', '.join([*_FLAGS, DRY_RUN])})")
        elif name == ESTIMATOR_FLAG and (inline if eq else _next(argv, i)) == "trloo":
            settings = settings.model_copy(update={"estimator": "trloo"})
            rest.append(f"{ESTIMATOR_FLAG}=rloo" if eq else ESTIMATOR_FLAG)
            if not eq:
                rest.append("rloo")
                i += 1
        else:
            rest.append(arg)
        i += 1
    if settings.estimator == "trloo":
        _check_trloo_arguments(rest, settings)
    return Launch(rest, settings, dry_run)


def _next(argv: list[str], i: int) -> str | None:
    return argv[i + 1] if i + 1 < len(argv) else None


def flag_value(argv: list[str], name: str) -> str | bool | None:
    """The value given to `name` (the last one wins), True for a bare flag, None when absent."""
    found: str | bool | None = None
    for i, arg in enumerate(argv):
        key, eq, inline = arg.partition("=")
        if key == name:
            nxt = _next(argv, i)
            found = inline if eq else (nxt if nxt is not None and not nxt.startswith("--") else True)
    return found


def _check_trloo_arguments(argv: list[str], settings: TrainerSettings) -> None:
    if not flag_value(argv, "--train.agent_func_path"):
        raise ValueError(
            "trloo needs per-turn rewards from the agent: pass --train.agent_func_path rl_client/openrlhf_agent.py"
        )
    kl = flag_value(argv, "--algo.kl.init_coef")
    if not flag_value(argv, "--algo.kl.use_loss") and (not isinstance(kl, str) or float(kl) != 0.0):
        raise ValueError(
            "trloo puts no KL penalty into the rewards: pass --algo.kl.init_coef 0 (OpenRLHF's default is 0.01), "
            "or use --algo.kl.use_loss"
        )
    for flag in ("--reward.overlong_buffer_len", "--reward.stop_properly_penalty_coef"):
        if flag_value(argv, flag) is not None:
            raise ValueError(f"{flag} changes the trajectory's summed reward, which trloo does not use")
    level = flag_value(argv, "--algo.advantage.is_correction_level")
    if settings.token_veto > 0 and level in (None, "off"):
        raise ValueError(
            "the token veto needs vLLM's log-probs: pass --algo.advantage.is_correction_level seq (Dr. Kernel's MRS: "
            "with --algo.advantage.is_correction_threshold 0.999 1.001), or --kernelgym.token_veto 0"
        )


def runtime_env(settings: TrainerSettings, environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The Ray job's runtime environment: our settings and the agent's KERNELGYM_* configuration for every worker,
    the variables OpenRLHF's `train()` sets when it starts Ray itself, and the setup hook."""
    env = {k: v for k, v in environ.items() if k.startswith("KERNELGYM_")}
    env[SETTINGS_ENV] = settings.to_json()
    for key, default in (
        ("TOKENIZERS_PARALLELISM", "true"),
        ("NCCL_DEBUG", "WARN"),
        ("RAY_ENABLE_ZERO_COPY_TORCH_TENSORS", "1"),
    ):
        env[key] = environ.get(key, default)
    return {"env_vars": env, "worker_process_setup_hook": SETUP_HOOK}


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Runs `patch(module)` right after the module `name` is first executed in this process."""

    def __init__(self, name: str, patch: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.patch = patch

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                _run_after_exec(spec.loader, self.patch)
                return spec
        return None


def _run_after_exec(loader: Any, patch: Callable[[ModuleType], None]) -> None:
    run = loader.exec_module

    def exec_module(module: ModuleType) -> None:
        run(module)
        patch(module)

    loader.exec_module = exec_module  # a file loader object serves this one module only


def patch_on_import(name: str, patch: Callable[[ModuleType], None]) -> None:
    """Apply `patch` to module `name` now if it is imported already, else as soon as it is."""
    if name in sys.modules:
        patch(sys.modules[name])
        return
    if not any(isinstance(f, _PatchOnImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport(name, patch))


def _patch_experience_maker(module: ModuleType) -> None:
    from rl_client.openrlhf_trloo import install

    install(module.RemoteExperienceMaker)


def setup_worker() -> None:
    """Ray's `worker_process_setup_hook` for the training job (also called in the driver)."""
    patch_on_import(EXPERIENCE_MAKER, _patch_experience_maker)


def start_ray(settings: TrainerSettings, **init_kwargs: Any) -> None:
    """Start (or join, with RAY_ADDRESS) Ray for the training job, with `runtime_env` for every worker; this
    process gets the settings and the patch too."""
    import ray

    os.environ[SETTINGS_ENV] = settings.to_json()
    ray.init(runtime_env=runtime_env(settings), **init_kwargs)
    setup_worker()


def describe_process() -> dict[str, Any]:
    """What this process would do with advantages: its settings and whether the experience maker is (or will be,
    on import) patched. Run it as a Ray task to see a worker's view."""
    from rl_client.openrlhf_trloo import ORIGINAL

    module = sys.modules.get(EXPERIENCE_MAKER)
    patched = module is not None and hasattr(module.RemoteExperienceMaker, ORIGINAL)
    return {
        "pid": os.getpid(),
        "settings": RLSettings.from_env().trainer.model_dump(),
        "patch_on_import": any(isinstance(f, _PatchOnImport) and f.name == EXPERIENCE_MAKER for f in sys.meta_path),
        "patched": patched,
        "kernelgym_env": sorted(k for k in os.environ if k.startswith("KERNELGYM_")),
    }


def _shown(env: dict[str, Any]) -> dict[str, Any]:
    """The runtime environment with secret-looking values hidden, for printing."""
    hidden = {
        k: "***" if k.endswith(("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")) else v for k, v in env["env_vars"].items()
    }
    return {**env, "env_vars": hidden}


def _run_openrlhf(argv: list[str]) -> None:
    import runpy

    sys.argv = ["openrlhf.cli.train_ppo_ray", *argv]
    runpy.run_module("openrlhf.cli.train_ppo_ray", run_name="__main__", alter_sys=True)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        _run_openrlhf(["--help"])
        return 0
    try:
        launch = rewrite_arguments(argv)
    except ValueError as exc:
        print(f"rl_client.openrlhf_train: {exc}", file=sys.stderr)
        return 2
    env = runtime_env(launch.settings)
    if launch.dry_run:
        print(json.dumps({"openrlhf_argv": launch.openrlhf_argv, "runtime_env": _shown(env)}, indent=1))
        return 0
    start_ray(launch.settings)
    _run_openrlhf(launch.openrlhf_argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
