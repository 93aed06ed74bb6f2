"""Per-channel means of a tall (4096, 3) fp32 matrix: an output of three elements, each a mean of 4096 values.

An output this small gives a digest little to tell calls apart by, and its values vary little between inputs
(issue 35); an honest kernel must get `passed` on every evaluation.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=0)


rows = 4096
channels = 3


def get_inputs():
    return [torch.randn(rows, channels)]


def get_init_inputs():
    return []
