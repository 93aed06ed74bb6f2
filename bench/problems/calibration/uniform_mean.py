"""Mean of a 512x1024 uniform [0, 1) fp32 tensor: a scalar near 0.5 that hardly depends on the inputs (its spread,
about 4e-4, is some 7,000 fp32 steps), so different inputs give the same bits now and then.

A value this insensitive to its inputs repeats across the many calls of an evaluation for the reference too: a
check that rejects repeats must judge them against the reference's outputs on the same inputs (issue 35). An
honest kernel must get `passed` on every evaluation.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean()


rows = 512
cols = 1024


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return []
