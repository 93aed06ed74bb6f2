"""Health probes for containers: `kernelgym healthcheck http|worker` (Docker HEALTHCHECK, Kubernetes probes).

Both are torch-free and cheap. `http` asks a process's own `/healthz`. `worker` reads the heartbeat that
every worker process of this host writes into Redis (gym_common.jobs.Keys.worker): the heartbeat exists
only while the worker's evaluation process is alive and can reach Redis, so it checks the worker the
way the gateway's `/readyz` sees it.
"""

from __future__ import annotations

import re
import socket
import time

import httpx
import redis

from gym_common.jobs import Keys
from gym_common.settings import ServiceSettings


def probe_http(url: str, timeout: float = 3.0) -> tuple[bool, str]:
    """Healthy when `url` answers 200."""
    try:
        response = httpx.get(url, timeout=timeout)
    except httpx.HTTPError as exc:
        return False, f"{url}: {type(exc).__name__}: {exc}"
    if response.status_code != 200:
        return False, f"{url}: HTTP {response.status_code}"
    return True, f"{url}: HTTP 200"


def probe_worker(
    settings: ServiceSettings, hostname: str | None = None, allow_quarantined: bool = False
) -> tuple[bool, str]:
    """Healthy when a worker process on `hostname` (default: this host) has a fresh heartbeat in Redis and,
    unless `allow_quarantined`, has not quarantined its GPU."""
    host = hostname or socket.gethostname()
    keys = Keys(settings.key_prefix)
    escaped = re.sub(r"([*?\[\]\\])", r"\\\1", host)  # glob metacharacters, literally
    pattern = keys.worker(f"*@{escaped}:*")
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=3, socket_connect_timeout=3)
    try:
        beats = [client.hgetall(key) for key in client.scan_iter(match=pattern, count=500)]
    except redis.RedisError as exc:
        return False, f"Redis unreachable: {type(exc).__name__}: {exc}"
    finally:
        client.close()
    now = time.time()
    fresh = [
        {k.decode(): v.decode() for k, v in beat.items()}
        for beat in beats
        if beat and now - float(beat.get(b"seen", b"0")) <= 3 * settings.heartbeat_s
    ]
    if not fresh:
        return False, f"no fresh worker heartbeat from host {host}"
    serving = [b for b in fresh if b.get("quarantined") != "1"]
    if not serving and not allow_quarantined:
        return False, f"every worker on host {host} has quarantined its GPU"
    classes = sorted({b.get("device_class", "?") for b in fresh})
    return True, f"{len(fresh)} worker process(es) on {host} ({', '.join(classes)}), {len(serving)} serving"
