"""Parts of the installed OpenRLHF 0.11.2 that cannot be imported on a machine without a GPU (their modules import
ray, vllm and deepspeed at the top), compiled from the installed files instead: the argument parsing and checks of
`openrlhf.cli.train_ppo_ray`, and single methods that need nothing but torch and `Experience`. Nothing is copied:
the code runs from OpenRLHF's own files."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import sys
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from openrlhf.trainer.ppo_utils.experience import Experience


def installed(relative: str) -> Path:
    """A file of the installed openrlhf package, e.g. "cli/train_ppo_ray.py"."""
    return Path(importlib.util.find_spec("openrlhf").submodule_search_locations[0]) / relative


def tree(relative: str) -> ast.Module:
    return ast.parse(installed(relative).read_text())


def class_def(relative: str, name: str) -> ast.ClassDef:
    [found] = [n for n in tree(relative).body if isinstance(n, ast.ClassDef) and n.name == name]
    return found


def method_def(relative: str, class_name: str, name: str) -> ast.FunctionDef:
    [found] = [n for n in class_def(relative, class_name).body if isinstance(n, ast.FunctionDef) and n.name == name]
    return found


def parse_train_ppo_ray(argv: list[str]) -> SimpleNamespace:
    """`python -m openrlhf.cli.train_ppo_ray ARGV` up to the call of `train(args)`: OpenRLHF's own parser, its
    hierarchical namespace and its argument checks (assertions included). Returns the `args` given to `train`."""
    path = installed("cli/train_ppo_ray.py")
    [main] = [n for n in ast.parse(path.read_text()).body if isinstance(n, ast.If) and "__main__" in ast.unparse(n)]
    code = compile(ast.Module(body=main.body, type_ignores=[]), str(path), "exec")
    seen: list[SimpleNamespace] = []
    namespace = {"argparse": argparse, "os": os, "datetime": datetime, "train": seen.append}
    saved = sys.argv
    sys.argv = ["train_ppo_ray", *argv]
    try:
        exec(code, namespace)
    finally:
        sys.argv = saved
    [args] = seen
    return args


def method(relative: str, class_name: str, name: str, **names: Any) -> Any:
    """A method of an OpenRLHF class as a plain function (call it with any `self`), compiled alone from the
    installed file with `names` (plus torch and Experience) as its module globals."""
    import torch

    node = method_def(relative, class_name, name)
    node.decorator_list = []
    path = installed(relative)
    code = compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec")
    namespace: dict[str, Any] = {"torch": torch, "Experience": Experience, **names}
    exec(code, namespace)
    return namespace[name]


def response_to_experience(response: dict[str, Any], max_len: int) -> Experience:
    """OpenRLHF's `SamplesGenerator._process_response_into_experience`: one agent trajectory as an Experience."""
    fn = method("trainer/ppo_utils/samples_generator.py", "SamplesGenerator", "_process_response_into_experience")
    return fn(None, response, max_len=max_len)


def split_rollout_samples(samples: list[Experience], args: SimpleNamespace, pad_token_id: int = 0) -> list[Experience]:
    """OpenRLHF's `RemoteExperienceMaker.split_rollout_samples`: numbers the trajectories and makes micro-batches."""
    fn = method("trainer/ppo_utils/experience_maker.py", "RemoteExperienceMaker", "split_rollout_samples")
    return fn(SimpleNamespace(args=args, tokenizer=SimpleNamespace(pad_token_id=pad_token_id)), samples)
