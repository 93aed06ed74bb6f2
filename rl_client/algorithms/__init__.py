"""The Dr. Kernel training algorithms as pure PyTorch functions: one function per formula.

Shapes: `[B, T]` is trajectory × turn; `[B, L]` is trajectory × token.
"""

from rl_client.algorithms.advantages import grpo_advantages, trloo_advantages, turn_returns
from rl_client.algorithms.masking import failure_after_success_mask, judged_mask
from rl_client.algorithms.mismatch import MismatchResult, mismatch_rejection
from rl_client.algorithms.rejection import prs_keep
from rl_client.algorithms.rewards import DRKERNEL_PR, RewardSpec, TurnReward, turn_reward

__all__ = [
    "DRKERNEL_PR",
    "MismatchResult",
    "RewardSpec",
    "TurnReward",
    "failure_after_success_mask",
    "grpo_advantages",
    "judged_mask",
    "mismatch_rejection",
    "prs_keep",
    "trloo_advantages",
    "turn_returns",
    "turn_reward",
]
