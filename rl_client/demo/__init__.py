"""`kernelgym-rl demo-learn`: a small primed policy learns from the real service's rewards (see `learn`)."""

from rl_client.demo.learn import DemoOptions, prepare, run, summary, train

__all__ = ["DemoOptions", "prepare", "run", "summary", "train"]
