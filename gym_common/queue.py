"""The Celery application both sides build: the gateway to send tasks, the workers to run them.

Redis broker, late acknowledgement, one task at a time per pool process (`kernelgym worker` sets how many
processes run, gym_worker.run.concurrency). Results do not go through Celery: the
task writes them into the job record (gym_common.jobs), which has its own TTL; the broker carries job ids.
"""

from __future__ import annotations

from celery import Celery

from gym_common.jobs import Keys
from gym_common.settings import ServiceSettings


def make_celery(settings: ServiceSettings) -> Celery:
    app = Celery("kernelgym", broker=settings.redis_url)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        # Late acknowledgement: a task whose worker dies is redelivered; the job record counts deliveries
        # (gym_common.settings.max_attempts) so a candidate that keeps killing workers ends as `crashed`.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # A running evaluation goes on through a broker outage and stores its outcome once Redis is back
        # (gym_worker.store.persist); one whose worker dies is queued again when its lease lapses (gym_common.leases).
        worker_cancel_long_running_tasks_on_connection_loss=False,
        worker_prefetch_multiplier=1,
        worker_concurrency=1,  # a worker started without `kernelgym worker`, which passes --concurrency
        task_time_limit=settings.task_time_limit_s,
        task_soft_time_limit=max(5, settings.task_time_limit_s - 30),
        broker_connection_retry_on_startup=True,
        # The gateway sends from many threads at once; each send holds a pooled broker connection.
        broker_pool_limit=64,
        broker_transport_options={
            "visibility_timeout": settings.visibility_timeout_s,
            # Queues are listed high to low; take from the first that has work.
            "queue_order_strategy": "priority",
        },
        task_default_queue=Keys(settings.key_prefix).queue(settings.default_device_class, "normal"),
        worker_hijack_root_logger=False,
    )
    return app
