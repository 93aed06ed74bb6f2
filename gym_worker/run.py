"""`kernelgym worker`: one Celery worker process serving one device, with one task at a time."""

from __future__ import annotations

import os
import socket


def run_worker(device_class: str, gpu: int | None, name: str | None, loglevel: str) -> None:
    """Pin the GPU and the device class in the environment before anything imports torch or reads settings."""
    os.environ["KERNELGYM_DEVICE_CLASS"] = device_class
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    if device_class == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from gym_common.jobs import Keys
    from gym_common.logs import configure_json_logging

    configure_json_logging(loglevel)
    from gym_worker.tasks import app, settings

    node = name or f"{device_class}{'' if gpu is None else f'-gpu{gpu}'}-{os.getpid()}@{socket.gethostname()}"
    app.worker_main(
        [
            "worker",
            "--pool=prefork",
            "--concurrency=1",
            f"--queues={','.join(Keys(settings.key_prefix).queues(device_class))}",
            f"--hostname={node}",
            f"--loglevel={loglevel}",
            "--without-gossip",
            "--without-mingle",
        ]
    )
