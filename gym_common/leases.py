"""Leases: how the service finds an evaluation whose worker died and queues it again within a minute.

A worker takes a lease on the job it runs: a Redis key with a TTL of LEASE_BEATS heartbeats, which its heartbeat
renews, plus an entry in the running set (scored by the last renewal). A gateway's sweeper looks every heartbeat
at the entries not renewed for a lease's length: one whose lease lapsed is queued again with a new Celery message
(or finished as cancelled when cancellation was asked meanwhile). Celery's own redelivery of an unacknowledged
task waits for the visibility timeout (an hour by default) and does not happen at all for a task whose worker
was killed whole; a delivery that finds the job final, or leased by a live worker, is dropped. The job record's
attempt count (`KERNELGYM_MAX_ATTEMPTS`) bounds how often one job runs, so a task that kills its worker every
time ends as `crashed` instead of looping.

The same claim script guards the reference-timing claims of gym_worker.tasks.RedisTimingStore.
"""

from __future__ import annotations

# How many heartbeats a lease outlives its last renewal: a stalled heartbeat or two is not a dead worker.
LEASE_BEATS = 4

# Take or renew a claim (KEYS[1]) for an owner (ARGV[1]) for ARGV[2] ms, unless another owner holds it; with
# KEYS[2], also record ARGV[4] in that sorted set with score ARGV[3] (the running set: when it was last renewed).
CLAIM_SCRIPT = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if KEYS[2] then redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4]) end
return 1
"""

# Drop a claim only when the owner (ARGV[1]) holds it; with KEYS[2], drop ARGV[2] from that sorted set.
RELEASE_SCRIPT = """
if KEYS[2] then redis.call('ZREM', KEYS[2], ARGV[2]) end
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# A job of the running set whose lease lapsed: 1 if it was set back to `queued` (the caller sends its task again),
# 2 if cancellation was asked (the caller finishes it as cancelled), 0 if it is leased, final or gone. It leaves
# the running set unless leased. KEYS: job hash, its lease, the running set. ARGV: job id.
REQUEUE_SCRIPT = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('ZREM', KEYS[3], ARGV[1])
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'running' and status ~= 'queued' then return 0 end
if redis.call('HGET', KEYS[1], 'cancel') == '1' then return 2 end
redis.call('HSET', KEYS[1], 'status', 'queued')
return 1
"""


def lease_s(heartbeat_s: float) -> float:
    """How long a job's lease lasts after its last renewal."""
    return LEASE_BEATS * heartbeat_s
