"""The contract between the gateway and the workers: settings, Redis keys, job records, the Celery app.

Torch-free, so the gateway imports it; both sides agree by construction.
"""
