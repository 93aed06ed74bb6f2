"""Failed inline references cost their key, once: a reference is code a user sent, and one that raises, hangs or
dies holds a worker slot for up to its phase timeouts.

When an evaluation ends `failed` because its inline reference failed, the worker records (in one script):
- the reference itself, per key and device class, for `KERNELGYM_REFERENCE_FAILURE_TTL_S`: the gateway refuses
  the same reference from that key at once (422) instead of running it again;
- one more failure of the key within `KERNELGYM_REFERENCE_FAILURE_WINDOW_S`; past
  `KERNELGYM_REFERENCE_FAILURE_LIMIT` of them, a pause of `KERNELGYM_REFERENCE_FAILURE_PAUSE_S`, doubled with each
  further failure (at most the window), during which the gateway refuses the key's inline references (429 with
  Retry-After). Submissions of the problem set's own problems are never paused.

Both are kept per key: another key's evaluations of the same reference are not refused, so no key can get a
reference refused for others by making it fail.
"""

from __future__ import annotations

from gym_common.jobs import Keys
from gym_common.settings import ServiceSettings

# How much of a failure's reason the refusal repeats (its first line, cut): the whole is in the failed evaluation.
REASON_CHARS = 200

# KEYS: the reference's mark, the key's failure count, the key's pause. ARGV: reason, mark ttl, window, limit,
# pause, in seconds. Returns the pause set in seconds (0: none).
RECORD_SCRIPT = """
if tonumber(ARGV[2]) > 0 then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) end
local n = redis.call('INCR', KEYS[2])
if n == 1 then redis.call('EXPIRE', KEYS[2], ARGV[3]) end
local over = n - tonumber(ARGV[4])
if over <= 0 then return 0 end
local pause = math.min(tonumber(ARGV[3]), tonumber(ARGV[5]) * 2 ^ math.min(over - 1, 30))
redis.call('SET', KEYS[3], '1', 'EX', math.floor(pause))
return math.floor(pause)
"""


def short_reason(reason: str) -> str:
    """The first line of a failure's reason, cut: what a refusal or a log line repeats of it."""
    first = reason.strip().splitlines()[0] if reason.strip() else "no reason given"
    return first[:REASON_CHARS] + ("…" if len(first) > REASON_CHARS else "")


def record_call(
    keys: Keys, s: ServiceSettings, owner: str, device_class: str, digest: str, reason: str
) -> tuple[list[str], list[str | int]]:
    """KEYS and ARGV of RECORD_SCRIPT for one failed reference."""
    return (
        [
            keys.failed_reference(owner, device_class, digest),
            keys.reference_failures(owner),
            keys.reference_pause(owner),
        ],
        [
            short_reason(reason),
            s.reference_failure_ttl_s,
            s.reference_failure_window_s,
            s.reference_failure_limit,
            s.reference_failure_pause_s,
        ],
    )
