"""Rewards from KernelGym for other RL frameworks (OpenRLHF's remote reward, verl, TRL), with no glue code of
their own: each adapter turns the framework's call into `ScoreJob`s for the shared `ServiceScorer`."""
