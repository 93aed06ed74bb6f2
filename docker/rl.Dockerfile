# syntax=docker/dockerfile:1
# KernelGym RL client (rl_client): `kernelgym-rl train|evaluate|reward-server|episode-server`. It talks to
# the service over HTTP only (KERNELGYM_URL, KERNELGYM_API_KEY). The default command serves OpenRLHF's
# remote reward on port 8100.
#
#   docker build -f docker/rl.Dockerfile -t kernelgym-rl:0.1.0 .                      # torch from PyPI (CUDA build)
#   docker build -f docker/rl.Dockerfile --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu \
#       -t kernelgym-rl:0.1.0-cpu .                                                      # CPU build of torch
#
# OpenRLHF itself (flash-attn, deepspeed, vllm) is not installed: it needs a GPU training image of its own.
FROM python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://pypi.org/simple
ARG NUMPY_VERSION=2.4.6
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH

RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /home/kernelgym --create-home --shell /usr/sbin/nologin kernelgym \
    && python -m venv /opt/venv

RUN pip install --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}" \
    && pip install "numpy==${NUMPY_VERSION}"

COPY pyproject.toml docker/requirements.py /tmp/build/
RUN python /tmp/build/requirements.py /tmp/build/pyproject.toml rl > /tmp/build/requirements.txt \
    && pip install -r /tmp/build/requirements.txt "numpy==${NUMPY_VERSION}"

COPY pyproject.toml README.md /src/
COPY services /src/services
COPY gym_common /src/gym_common
COPY gym_client /src/gym_client
COPY rl_client /src/rl_client
COPY kernelgym /src/kernelgym
RUN pip install --no-deps /src && rm -rf /src /tmp/build

# A home of its own: training writes checkpoints, TensorBoard events and Hugging Face caches.
USER 10001:10001
WORKDIR /home/kernelgym
EXPOSE 8100
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["kernelgym", "healthcheck", "http", "--url", "http://127.0.0.1:8100/healthz"]
ENTRYPOINT ["tini", "--"]
CMD ["kernelgym-rl", "reward-server", "--host", "0.0.0.0", "--port", "8100"]
