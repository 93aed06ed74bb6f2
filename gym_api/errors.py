"""The gateway's refusals, one tree. The layers below the routes raise these and know nothing of HTTP; one
handler (`gym_api.guard.install`) answers each with its status code and `{"detail": ...}`.

    GatewayError            a request refused; `detail` never echoes the request's input
    ├── Unauthenticated     no API key, or an unknown one
    ├── NotFound            no such problem, evaluation or Idempotency-Key evaluation (unknown or expired)
    ├── IdempotencyConflict an Idempotency-Key used with another body, or whose first request is still admitted
    ├── Unprocessable       a request that cannot be evaluated as sent
    ├── Throttled           this API key must wait (`retry_after_s` when it is known)
    │   └── QuotaExceeded   it holds too many unfinished evaluations
    └── Unavailable         the queue is down; nothing was submitted
"""

from __future__ import annotations

# Long enough for Redis or the broker to come back after a restart.
RETRY_AFTER_S = 5


class GatewayError(Exception):
    """A request the gateway refuses: what to tell the caller, and when it may try again (seconds), if known."""

    def __init__(self, detail: str, retry_after_s: int | None = None):
        super().__init__(detail)
        self.detail = detail
        self.retry_after_s = retry_after_s

    def restated(self, detail: str) -> GatewayError:
        """The same refusal told otherwise (a batch's answer names every refused item)."""
        return type(self)(detail, self.retry_after_s)


class Unauthenticated(GatewayError):
    pass


class NotFound(GatewayError):
    pass


class IdempotencyConflict(GatewayError):
    pass


class Unprocessable(GatewayError):
    pass


class Throttled(GatewayError):
    pass


class QuotaExceeded(Throttled):
    pass


class Unavailable(GatewayError):
    pass
