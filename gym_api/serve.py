"""`kernelgym serve`: the gateway under uvicorn, refusing unsafe authentication set-ups."""

from __future__ import annotations

import uvicorn
from fastapi import FastAPI

from gym_api.app import create_app
from gym_common.logs import configure_json_logging
from gym_common.settings import ServiceSettings, load_settings


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
    """The application of one of several gateway processes: uvicorn starts each afresh, and it loads the
    KERNELGYM_* environment that `kernelgym serve` validated."""
    settings = load_settings(ServiceSettings)
    configure_json_logging(settings.log_level)
    return create_app(settings)


def serve(settings: ServiceSettings) -> None:
    check_auth(settings)
    configure_json_logging(settings.log_level)
    # One process serves the app of these settings; several each build their own from the same environment
    # (uvicorn starts them from an import string). All shared state is in Redis.
    app: FastAPI | str = create_app(settings) if settings.gateway_processes == 1 else "gym_api.serve:serve_app"
    uvicorn.run(
        app,
        factory=isinstance(app, str),
        host=settings.host,
        port=settings.port,
        workers=settings.gateway_processes,
        log_config=None,
        access_log=False,
    )
