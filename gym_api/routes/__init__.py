"""The gateway's routes, one router per module: `evaluate` (submissions), `evaluations` (a submission's state
and its cancellation), `problems`, `health` (liveness and readiness) and `metrics`. `gym_api.app` includes them in
that order, which is the order of the OpenAPI document's paths. Routes raise the gateway's typed refusals
(gym_api.errors), never an HTTP exception."""
