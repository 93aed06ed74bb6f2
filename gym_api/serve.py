"""`kernelgym serve`: the gateway under uvicorn, refusing unsafe authentication set-ups."""

from __future__ import annotations

import uvicorn

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


def serve(settings: ServiceSettings, loglevel: str = "INFO") -> None:
    check_auth(settings)
    configure_json_logging(loglevel)
    from gym_api.app import create_app

    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_config=None, access_log=False)
