# syntax=docker/dockerfile:1
# KernelGym GPU worker (gym_worker): CUDA runtime base, torch and Triton at the versions pyproject.toml pins
# (torch 2.13.0, whose CUDA build pins triton 3.7.1). One container serves one GPU.
#
#   docker build -f docker/worker.Dockerfile -t kernelgym-worker:0.1.0 .
#
# The torch wheel brings its own CUDA libraries (nvidia-*-cu13); the host needs an NVIDIA driver that supports
# CUDA 13 (580 or newer) and the NVIDIA Container Toolkit. Triton builds a small C launcher per kernel at run
# time, so gcc, libc headers and Python.h stay in the image.
FROM nvidia/cuda:13.0.1-runtime-ubuntu24.04@sha256:c3fde347d52d578c84fd644bc177bc7ec333feaf11550d990da4084d7612e4c7

ARG TORCH_VERSION=2.13.0
ARG NUMPY_VERSION=2.4.6
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev gcc libc6-dev tini \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin kernelgym \
    && python3 -m venv /opt/venv

# The largest layer (torch with its CUDA libraries, Triton), changed only with a version bump.
RUN pip install "torch==${TORCH_VERSION}" "numpy==${NUMPY_VERSION}"

COPY pyproject.toml docker/requirements.py /tmp/build/
RUN python /tmp/build/requirements.py /tmp/build/pyproject.toml core service > /tmp/build/requirements.txt \
    && pip install -r /tmp/build/requirements.txt "torch==${TORCH_VERSION}" "numpy==${NUMPY_VERSION}"

COPY pyproject.toml README.md /src/
COPY services /src/services
COPY gym_common /src/gym_common
COPY gym_worker /src/gym_worker
COPY kernelgym /src/kernelgym
RUN pip install --no-deps /src && rm -rf /src /tmp/build

USER 10001:10001
# Containers run with a read-only root: only /tmp (a tmpfs or emptyDir) is writable.
ENV HOME=/tmp
WORKDIR /tmp
# The class this worker serves (the queues kg.<class>.{high,normal,low}); set it per GPU type, e.g. h100.
ENV KERNELGYM_DEVICE_CLASS=gpu
HEALTHCHECK --interval=30s --timeout=10s --start-period=180s --retries=3 \
    CMD ["kernelgym", "healthcheck", "worker"]
# tini reaps the evaluation children's orphans and passes SIGTERM to Celery: a warm shutdown that finishes
# the running evaluation (give the container at least KERNELGYM_TASK_TIME_LIMIT_S to stop; docs/deploy.md).
ENTRYPOINT ["tini", "--"]
CMD ["kernelgym", "worker"]
