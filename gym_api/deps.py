"""What the routes are given: the process's gateway and settings (made once by `create_app`) and the caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from gym_api.gateway import Gateway
from gym_api.security import enforce_rate, owner_of
from gym_common.settings import ServiceSettings


def gateway(request: Request) -> Gateway:
    return request.app.state.gateway


def settings(request: Request) -> ServiceSettings:
    return request.app.state.settings


GatewayDep = Annotated[Gateway, Depends(gateway)]
SettingsDep = Annotated[ServiceSettings, Depends(settings)]


async def caller(request: Request, gw: GatewayDep, s: SettingsDep) -> str:
    """The authenticated owner of the request, counted against its rate limit."""
    owner = owner_of(request, s)
    await enforce_rate(gw.r, gw.keys, owner, s.rate_limit_per_minute)
    return owner


Owner = Annotated[str, Depends(caller)]
