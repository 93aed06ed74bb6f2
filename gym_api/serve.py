"""`kernelgym serve`: the gateway under uvicorn, refusing unsafe authentication set-ups."""

from __future__ import annotations

import uvicorn
from fastapi import FastAPI

from gym_api.app import create_app
from gym_common.logs import configure_json_logging
from gym_common.settings import ServiceSettings


class UnsafeConfiguration(ValueError):
    pass


def check_auth(settings: ServiceSettings) -> None:
    if settings.dev_mode and not settings.loopback():
        raise UnsafeConfiguration(
            f"development mode (no API keys) is only allowed on a loopback address, not {settings.host}"
        )
    if not settings.dev_mode and not settings.api_key_hashes:
        raise UnsafeConfiguration(
            "no API keys configured: set KERNELGYM_API_KEY_HASHES (see `kernelgym hash-key`), "
            "or KERNELGYM_DEV_MODE=true on a loopback address"
        )


def serve_app() -> FastAPI:
    """The application of one gateway process, built from the KERNELGYM_* environment."""
    settings = ServiceSettings()
    configure_json_logging(settings.log_level)
    return create_app(settings)


def serve(settings: ServiceSettings) -> None:
    check_auth(settings)
    configure_json_logging(settings.log_level)
    # Each process builds its own app from the same environment; all shared state is in Redis.
    uvicorn.run(
        "gym_api.serve:serve_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.gateway_processes,
        log_config=None,
        access_log=False,
    )
