"""A small typed client for the KernelGym HTTP API (httpx). It depends on nothing else of KernelGym, so
the RL client and any other program can use it."""

from gym_client.client import Evaluation, KernelGymClient, KernelGymError

__all__ = ["Evaluation", "KernelGymClient", "KernelGymError"]
