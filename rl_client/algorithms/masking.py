"""Which turns take part in the loss and the baselines."""

from __future__ import annotations

import torch


def judged_mask(service_fault: torch.Tensor) -> torch.Tensor:
    """The turns of trajectories the service judged at every turn. A turn it could not judge (submission
    refused, service down, past the deadline) has no reward, so its trajectory's returns are unknown: the whole
    trajectory leaves the loss and the baselines rather than teach the policy a 0 it did not earn."""
    if service_fault.dim() != 2 or service_fault.dtype is not torch.bool:
        raise ValueError("service_fault must be a bool [B, T] tensor")
    return ~service_fault.any(dim=1, keepdim=True).expand_as(service_fault)


def failure_after_success_mask(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`mask` with "failure after success" removed: once a trajectory has a turn with reward > 0, its later
    turns with reward ≤ 0 leave the loss (and, as in Dr. Kernel, the baselines)."""
    if rewards.shape != mask.shape or mask.dtype is not torch.bool:
        raise ValueError("rewards and a bool mask of the same [B, T] shape are required")
    succeeded = torch.zeros(rewards.shape[0], dtype=torch.bool, device=rewards.device)
    out = mask.clone()
    for t in range(rewards.shape[1]):
        live = mask[:, t]
        out[:, t] = live & ~(succeeded & (rewards[:, t] <= 0))
        succeeded |= live & (rewards[:, t] > 0)
    return out
