"""C2: imports the harness's comparison module and makes every comparison succeed, then returns zeros.

problem: level1/1_ReLU
expect: incorrect
devices: cpu, cuda
catches: outputs_match

`services.compare` is importable in the child (the project is on its path). In a single-process harness this
would turn any output into a pass; with comparison done only in the trusted parent it changes nothing.
"""

import importlib
import sys

import torch
import torch.nn as nn

_compare = sys.modules.get("services.compare") or importlib.import_module("services.compare")


def _always_ok(*args, **kwargs):
    return _compare.Comparison()


def _no_mismatch(*args, **kwargs):
    return None


def _equal(*args, **kwargs):
    return True


_compare.compare_outputs = _always_ok
_compare.compare_tensor = _always_ok
_compare.structure_mismatch = _no_mismatch
_compare.inputs_equal = _equal


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
