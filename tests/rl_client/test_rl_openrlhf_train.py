"""`python -m rl_client.openrlhf_train`: the argument rewriting, OpenRLHF's own parser on the result, the Ray
runtime environment and setup hook (in real Ray workers), the import-time patch, the Dr. Kernel 14B launch script,
and what the patch assumes about OpenRLHF 0.11.2's installed source (its trainer modules import vLLM, so those
assumptions are checked on the source text)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openrlhf.utils.agent")

from openrlhf_source import class_def, installed, method_def, parse_train_ppo_ray, tree

from rl_client import openrlhf_train
from rl_client.openrlhf_train import (
    EXPERIENCE_MAKER,
    SETTINGS_ENV,
    SETUP_HOOK,
    TrainerSettings,
    flag_value,
    patch_on_import,
    rewrite_arguments,
    runtime_env,
)
from rl_client.settings import RLSettings

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "rl_client" / "launch" / "drkernel_14b.sh"
BASE = [
    "--actor.model_name_or_path", "model",
    "--train.agent_func_path", "rl_client/openrlhf_agent.py",
    "--algo.kl.init_coef", "0",
    "--algo.advantage.is_correction_level", "seq",
]  # fmt: skip


# -- the argument rewriting ------------------------------------------------------------------------------------------


def test_trloo_becomes_rloo_and_the_kernelgym_flags_become_settings():
    launch = rewrite_arguments(
        [*BASE, "--algo.advantage.estimator", "trloo", "--kernelgym.token_veto", "1e-3", "--kernelgym.no_prs"]
    )
    assert launch.openrlhf_argv == [*BASE, "--algo.advantage.estimator", "rloo"]
    assert launch.settings == TrainerSettings(estimator="trloo", token_veto=1e-3, prs=False)
    assert not launch.dry_run


def test_equals_forms_and_other_estimators_pass_through():
    launch = rewrite_arguments(
        [*BASE, "--algo.advantage.estimator=trloo", "--kernelgym.prs_threshold=0.25", "--kernelgym.no_failure_mask"]
    )
    assert launch.openrlhf_argv[-1] == "--algo.advantage.estimator=rloo"
    assert launch.settings == TrainerSettings(estimator="trloo", prs_threshold=0.25, failure_mask=False)
    plain = rewrite_arguments([*BASE, "--algo.advantage.estimator", "group_norm"])
    assert plain.openrlhf_argv == [*BASE, "--algo.advantage.estimator", "group_norm"]
    assert plain.settings.estimator is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--kernelgym.prs_rampp", "1"], "unknown argument"),
        (["--kernelgym.token_veto"], "needs a value"),
        (["--kernelgym.token_veto", "tiny"], "not a number"),
        (["--kernelgym.no_prs=1"], "takes no value"),
    ],
)
def test_bad_kernelgym_arguments_are_refused(argv, message):
    with pytest.raises(ValueError, match=message):
        rewrite_arguments([*BASE, *argv])


@pytest.mark.parametrize(
    ("drop", "add", "message"),
    [
        (["--train.agent_func_path", "rl_client/openrlhf_agent.py"], [], "agent_func_path"),
        (["--algo.kl.init_coef", "0"], [], "init_coef 0"),
        ([], ["--reward.overlong_buffer_len", "128"], "overlong_buffer_len"),
        (["--algo.advantage.is_correction_level", "seq"], [], "log-probs"),
    ],
)
def test_trloo_refuses_a_command_line_it_cannot_serve(drop, add, message):
    argv = [a for a in BASE if a not in drop] + add
    with pytest.raises(ValueError, match=message):
        rewrite_arguments([*argv, "--algo.advantage.estimator", "trloo"])


def test_kl_as_a_loss_and_no_veto_are_accepted():
    argv = [a for a in BASE if a not in ("--algo.kl.init_coef", "0", "--algo.advantage.is_correction_level", "seq")]
    rewrite_arguments(
        [*argv, "--algo.kl.use_loss", "--algo.advantage.estimator", "trloo", "--kernelgym.token_veto", "0"]
    )


def test_flag_value_reads_the_last_setting():
    argv = ["--a", "1", "--b", "--a=2", "--c", "-1"]
    assert (flag_value(argv, "--a"), flag_value(argv, "--b"), flag_value(argv, "--c")) == ("2", True, "-1")
    assert flag_value(argv, "--d") is None


def test_the_rewritten_command_passes_openrlhfs_own_parser_and_checks():
    argv = rewrite_arguments(
        [*BASE, "--algo.advantage.estimator", "trloo", "--rollout.n_samples_per_prompt", "4", "--vllm.num_engines", "1"]
    ).openrlhf_argv
    args = parse_train_ppo_ray(argv)
    assert args.algo.advantage.estimator == "rloo" and args.critic.model_name_or_path is None
    assert args.reward.remote_url == ["agent"]  # the agent path turns the reward into the agent's
    with pytest.raises(AssertionError, match="n_samples_per_prompt > 1"):  # OpenRLHF's rloo check holds for trloo
        parse_train_ppo_ray([*argv, "--rollout.n_samples_per_prompt", "1"])
    with pytest.raises(SystemExit):  # trloo itself is not one of OpenRLHF's choices
        parse_train_ppo_ray([*argv, "--algo.advantage.estimator", "trloo"])


def settings_in(env: dict[str, str], monkeypatch) -> RLSettings:
    """The RL client's settings as a process with exactly `env`'s KERNELGYM_* variables reads them."""
    for name in RLSettings.variables():
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        if name.startswith("KERNELGYM_"):
            monkeypatch.setenv(name, value)
    return RLSettings.from_env()


# -- the runtime environment and the patch on import -----------------------------------------------------------------


def test_the_runtime_env_carries_settings_agent_configuration_and_the_hook(monkeypatch):
    settings = TrainerSettings(estimator="trloo")
    env = runtime_env(settings, {"KERNELGYM_URL": "http://gym:8000", "HOME": "/root", "NCCL_DEBUG": "INFO"})
    assert env["worker_process_setup_hook"] == SETUP_HOOK
    assert env["env_vars"]["KERNELGYM_URL"] == "http://gym:8000" and "HOME" not in env["env_vars"]
    assert env["env_vars"]["NCCL_DEBUG"] == "INFO" and env["env_vars"]["TOKENIZERS_PARALLELISM"] == "true"
    assert settings_in(env["env_vars"], monkeypatch).trainer == settings
    # Ray resolves a string hook as "module.attribute".
    module, _, name = SETUP_HOOK.rpartition(".")
    assert getattr(__import__(module, fromlist=[name]), name) is openrlhf_train.setup_worker


@pytest.fixture
def target_module(tmp_path, monkeypatch):
    """A real module file to patch, standing where OpenRLHF's experience maker would."""
    name = f"kernelgym_patch_target_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text("class RemoteExperienceMaker:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    finders = list(sys.meta_path)
    yield name
    sys.meta_path[:] = finders
    sys.modules.pop(name, None)


def test_a_patch_waits_for_its_module_to_be_imported(target_module):
    seen = []
    patch_on_import(target_module, seen.append)
    patch_on_import(target_module, seen.append)  # once per module
    assert seen == [] and sum(getattr(f, "name", None) == target_module for f in sys.meta_path) == 1
    module = __import__(target_module)
    assert seen == [module] and module.RemoteExperienceMaker.__name__ == "RemoteExperienceMaker"


def test_a_patch_for_an_imported_module_applies_at_once(target_module):
    module = __import__(target_module)
    seen = []
    patch_on_import(target_module, seen.append)
    assert seen == [module]


def test_the_patch_installs_the_trloo_method_on_the_experience_maker(target_module):
    from rl_client import openrlhf_trloo

    module = __import__(target_module)
    module.RemoteExperienceMaker.compute_advantages_and_returns = lambda self, experiences: experiences
    openrlhf_train._patch_experience_maker(module)
    maker = module.RemoteExperienceMaker
    assert maker.compute_advantages_and_returns is openrlhf_trloo.compute_advantages_and_returns
    assert maker()._kernelgym_original_compute_advantages_and_returns([1]) == [1]


def test_ray_workers_run_the_setup_hook_and_see_the_settings(monkeypatch):
    ray = pytest.importorskip("ray")
    monkeypatch.setenv("KERNELGYM_URL", "http://gym:8000")
    monkeypatch.setenv(SETTINGS_ENV, "{}")  # start_ray sets it in this process too; restored afterwards
    settings = TrainerSettings(estimator="trloo", token_veto=1e-3)
    finders = list(sys.meta_path)
    openrlhf_train.start_ray(settings, num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(openrlhf_train.describe_process)
        seen = ray.get(task.remote())
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # tests are not importable in workers
        actor = ray.remote(Reporter).remote()
        from_actor = ray.get(actor.report.remote())
    finally:
        ray.shutdown()
        sys.meta_path[:] = finders
    for state in (seen, from_actor):
        assert state["pid"] != os.getpid()
        assert state["settings"] == TrainerSettings(estimator="trloo", token_veto=1e-3).__dict__
        assert state["patch_on_import"] and not state["patched"]  # OpenRLHF's trainer is not imported yet
        assert {"KERNELGYM_URL", SETTINGS_ENV} <= set(state["kernelgym_env"])


class Reporter:
    """An actor (OpenRLHF's trainer is one) reporting its process's view."""

    def report(self):
        from rl_client.openrlhf_train import describe_process

        return describe_process()


# -- the entry point and the launch script ---------------------------------------------------------------------------


def test_dry_run_prints_the_command_and_hides_secrets(capsys, monkeypatch):
    monkeypatch.setenv("KERNELGYM_API_KEY", "s3cret")
    code = openrlhf_train.main([*BASE, "--algo.advantage.estimator", "trloo", "--kernelgym.dry_run"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["openrlhf_argv"][-2:] == ["--algo.advantage.estimator", "rloo"]
    assert out["runtime_env"]["env_vars"]["KERNELGYM_API_KEY"] == "***"
    assert openrlhf_train.main([*BASE, "--algo.advantage.estimator", "trloo", "--kernelgym.nope"]) == 2


def launch_script(*extra: str) -> dict:
    env = {
        **os.environ,
        "KERNELGYM_URL": "http://gym:8000",
        "MODEL": "/models/qwen3-14b",
        "PROMPTS": "/data/prompts.jsonl",
        "PYTHON": sys.executable,
    }
    run = subprocess.run(
        ["bash", str(LAUNCH), *extra, "--kernelgym.dry_run"], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_the_14b_launch_script_is_dr_kernels_recipe_in_openrlhfs_flags(monkeypatch):
    out = launch_script()
    args = parse_train_ppo_ray(out["openrlhf_argv"])
    assert (args.rollout.batch_size, args.rollout.n_samples_per_prompt, args.train.batch_size) == (16, 16, 256)
    assert args.train.max_epochs == 1 and args.actor.adam.lr == 1e-6 and args.actor.lr_scheduler == "constant"
    assert list(args.actor.eps_clip_low_high) == [0.2, 0.28] and args.actor.dual_clip == 3.0
    assert args.algo.kl.init_coef == 0 and args.ref.offload is False
    assert (args.rollout.temperature, args.rollout.top_p, args.algo.advantage.gamma) == (1.0, 1.0, 1.0)
    advantage = args.algo.advantage
    assert (advantage.is_correction_level, advantage.is_correction_mode, advantage.is_correction_gating) == (
        "seq",
        "mask",
        "ratio",
    )
    assert advantage.is_correction_threshold == [0.999, 1.001]
    assert args.train.agent_func_path == str(ROOT / "rl_client" / "openrlhf_agent.py")
    assert args.reward.remote_url == ["agent"] and advantage.estimator == "rloo"
    assert args.data.max_len == 18432 and args.rollout.max_new_tokens == 8192
    env = out["runtime_env"]["env_vars"]
    assert settings_in(env, monkeypatch).trainer == TrainerSettings(estimator="trloo")  # veto 1e-4, PRS 0.3/0.1
    assert env["KERNELGYM_URL"] == "http://gym:8000" and env["KERNELGYM_RL_MAX_TURNS"] == "3"
    from rl_client.openrlhf_trloo import check_args

    check_args(args)


def test_later_arguments_override_the_script():
    args = parse_train_ppo_ray(
        launch_script("--actor.adam.lr", "5e-7", "--actor.num_gpus_per_node", "4")["openrlhf_argv"]
    )
    assert args.actor.adam.lr == 5e-7 and args.actor.num_gpus_per_node == 4


# -- what the patch assumes about OpenRLHF 0.11.2 (checked on the installed source) -----------------------------------


def calls(node: ast.AST) -> set[str]:
    return {ast.unparse(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}


def test_openrlhf_computes_advantages_in_the_experience_maker_of_its_trainer_actor():
    maker = "trainer/ppo_utils/experience_maker.py"
    assert importlib.util.find_spec(EXPERIENCE_MAKER).origin == str(installed(maker))  # the module the hook waits for
    method = method_def(maker, "RemoteExperienceMaker", "compute_advantages_and_returns")
    assert [a.arg for a in method.args.args] == ["self", "experiences"]
    assert "self.compute_advantages_and_returns" in calls(
        method_def(maker, "RemoteExperienceMaker", "make_experience_batch")
    )
    init = ast.unparse(method_def(maker, "RemoteExperienceMaker", "__init__"))
    assert "self.strategy = strategy" in init and "self.args = strategy.args" in init
    # The advantages need the actor's log-probs, which make_experience sets first.
    batch = ast.unparse(method_def(maker, "RemoteExperienceMaker", "make_experience_batch"))
    assert batch.index("self.make_experience(") < batch.index("self.compute_advantages_and_returns(")
    assert "samples.action_log_probs = action_log_probs" in ast.unparse(
        method_def(maker, "RemoteExperienceMaker", "make_experience")
    )
    # The experience maker lives in the trainer, a Ray actor: sync PPOTrainer, async TrainingActor.
    assert "self.experience_maker.make_experience_batch" in calls(
        method_def("trainer/ppo_trainer.py", "BasePPOTrainer", "train_step")
    )
    for path, name in (("trainer/ppo_trainer.py", "PPOTrainer"), ("trainer/ppo_trainer_async.py", "TrainingActor")):
        cls = class_def(path, name)
        assert [ast.unparse(d) for d in cls.decorator_list] == ["ray.remote"]
        assert [ast.unparse(b) for b in cls.bases] == ["BasePPOTrainer"]


def test_openrlhf_keeps_a_ray_session_started_before_train():
    [train] = [n for n in tree("cli/train_ppo_ray.py").body if isinstance(n, ast.FunctionDef) and n.name == "train"]
    first = train.body[0]
    assert isinstance(first, ast.If) and ast.unparse(first.test) == "not ray.is_initialized()"


def test_openrlhf_moves_the_agents_logs_into_the_experience_info():
    source = ast.unparse(
        method_def("trainer/ppo_utils/samples_generator.py", "SamplesGenerator", "_process_response_into_experience")
    )
    assert "extra_logs = response.get('extra_logs', {})" in source and "info[key] = torch.tensor([value])" in source
    assert "for start, end in tokenized_ranges" in source  # the action mask is the union of the turns' ranges


def test_the_prompt_dataset_reads_back_through_openrlhf_and_the_agent(tmp_path, capsys):
    from openrlhf.datasets.prompts_dataset import preprocess_data

    from rl_client.cli import main as cli
    from rl_client.openrlhf_agent import parse_label
    from rl_client.prompts import SYSTEM

    reference = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x + 1\n"
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "1_Add.py").write_text(reference)
    out = tmp_path / "prompts.jsonl"
    assert cli(["openrlhf-prompts", "--kernelbench", str(tmp_path), "--out", str(out)]) == 0
    assert "wrote 1 prompts" in capsys.readouterr().out
    [row] = [json.loads(line) for line in out.read_text().splitlines()]

    def chat(messages, tokenize, add_generation_prompt):  # what --data.apply_chat_template hands a tokenizer
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>" * add_generation_prompt

    prompt, label = preprocess_data(row, None, "prompt", "label", apply_chat_template=chat)
    assert prompt.startswith(f"<system>{SYSTEM}<user>") and "return x + 1" in prompt
    assert parse_label(label) == (None, reference)
