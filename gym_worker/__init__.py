"""Celery workers that run evaluations with the evaluation core, one process per GPU."""
