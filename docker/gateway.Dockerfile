# syntax=docker/dockerfile:1
# KernelGym gateway (gym_api): the package's base and `service` dependencies only. No torch, no Triton:
# the gateway never imports them (tests/gym_api/test_service_api.py checks this).
#
#   docker build -f docker/gateway.Dockerfile -t kernelgym-gateway:0.1.0 .
#
# Configuration comes from KERNELGYM_* variables at run time (docs/service.md); API key digests and the
# Redis URL (with its password) are passed in by docker-compose.yml or the Kubernetes Secret, never baked in.
FROM python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH

RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin kernelgym \
    && python -m venv /opt/venv

# Dependencies first, in their own layer: rebuilt only when pyproject.toml changes.
COPY pyproject.toml docker/requirements.py /tmp/build/
RUN python /tmp/build/requirements.py /tmp/build/pyproject.toml service > /tmp/build/requirements.txt \
    && pip install -r /tmp/build/requirements.txt

COPY pyproject.toml README.md /src/
COPY services /src/services
COPY gym_common /src/gym_common
COPY gym_api /src/gym_api
COPY kernelgym /src/kernelgym
RUN pip install --no-deps /src && rm -rf /src /tmp/build

USER 10001:10001
# Containers run with a read-only root: only /tmp (a tmpfs or emptyDir) is writable.
ENV HOME=/tmp
WORKDIR /tmp
ENV KERNELGYM_HOST=0.0.0.0 \
    KERNELGYM_PORT=8000
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["kernelgym", "healthcheck", "http"]
ENTRYPOINT ["tini", "--"]
CMD ["kernelgym", "serve"]
