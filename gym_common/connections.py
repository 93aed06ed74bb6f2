"""How the gateway and the workers retry Redis commands: a pooled connection that a Redis restart closed fails its
next command, which is then sent again on a fresh connection instead of failing a request (a 503) or a task once
Redis answers. Only connection errors are retried: a command that timed out may have run."""

from __future__ import annotations

import redis.asyncio.retry
import redis.retry
from redis.backoff import AbstractBackoff, ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

RETRIES = 3
RETRIED = (RedisConnectionError,)


def _backoff() -> AbstractBackoff:
    return ExponentialWithJitterBackoff(base=0.05, cap=0.5)


def sync_retry() -> redis.retry.Retry:
    return redis.retry.Retry(_backoff(), RETRIES, RETRIED)


def async_retry() -> redis.asyncio.retry.Retry:
    return redis.asyncio.retry.Retry(_backoff(), RETRIES, RETRIED)
