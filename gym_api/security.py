"""API keys (stored as SHA-256 digests), per-key rate limits and the cap on unfinished evaluations."""

from __future__ import annotations

import hashlib
import hmac
import time

import redis.asyncio as aioredis
from fastapi import Request

from gym_api.errors import Throttled, Unauthenticated
from gym_common.jobs import Keys
from gym_common.settings import ServiceSettings

DEV_OWNER = "dev"


def hash_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode()).hexdigest()


def owner_of(request: Request, settings: ServiceSettings) -> str:
    """The caller's identity: the first 16 hex digits of its key's digest, or `dev` in development mode."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        digest = hash_key(token.strip())
        if any(hmac.compare_digest(digest, known) for known in settings.api_key_hashes):
            return digest[:16]
        raise Unauthenticated("unknown API key")
    if settings.dev_mode:
        return DEV_OWNER
    raise Unauthenticated("send an API key as `Authorization: Bearer <key>`")


async def enforce_rate(r: aioredis.Redis, keys: Keys, owner: str, limit: int) -> None:
    minute = int(time.time() // 60)
    key = keys.rate(owner, minute)
    pipe = r.pipeline(transaction=True)
    pipe.incr(key)
    pipe.expire(key, 120)
    count, _ = await pipe.execute()
    if count > limit:
        retry = 60 - int(time.time()) % 60
        raise Throttled(f"rate limit of {limit} requests per minute reached for this API key", retry)
