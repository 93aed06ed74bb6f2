"""The problem set the gateway serves (its location on the server is never revealed)."""

from __future__ import annotations

from fastapi import APIRouter

from gym_api.deps import GatewayDep, Owner
from gym_api.models import ProblemInfo
from gym_api.routes.answers import errors

router = APIRouter()


# No docstrings on these two: a docstring becomes the route's OpenAPI description.
@router.get("/problems", response_model=list[ProblemInfo], responses=errors())
async def list_problems(_: Owner, gw: GatewayDep) -> list[ProblemInfo]:
    return [ProblemInfo(id=i) for i in sorted(gw.problem_ids)]


@router.get("/problems/{problem_id:path}", response_model=ProblemInfo, responses=errors(404))
async def get_problem(problem_id: str, _: Owner, gw: GatewayDep) -> ProblemInfo:
    problem = gw.problem(problem_id)
    return ProblemInfo(id=problem.id, source=problem.source)
