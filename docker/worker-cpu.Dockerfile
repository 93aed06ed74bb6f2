# syntax=docker/dockerfile:1
# KernelGym CPU worker: the same pipeline through the Triton interpreter on CPU tensors (device class `cpu`).
# For development and for machines without a GPU; verdicts are real, timings are not meaningful.
#
#   docker build -f docker/worker-cpu.Dockerfile -t kernelgym-worker-cpu:0.1.0 .
#
# The interpreter compiles nothing, so no C compiler is needed (checked: `kernelgym eval --device cpu` passes
# with no gcc on PATH).
FROM python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG NUMPY_VERSION=2.4.6
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

# The CPU build of torch (about 0.9 GB smaller than the CUDA build), then Triton for its interpreter.
RUN pip install --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}" \
    && pip install "numpy==${NUMPY_VERSION}"

COPY pyproject.toml docker/requirements.py /tmp/build/
RUN python /tmp/build/requirements.py /tmp/build/pyproject.toml core service > /tmp/build/requirements.txt \
    && pip install -r /tmp/build/requirements.txt "numpy==${NUMPY_VERSION}"

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
ENV KERNELGYM_DEVICE_CLASS=cpu \
    TRITON_INTERPRET=1
HEALTHCHECK --interval=30s --timeout=10s --start-period=120s --retries=3 \
    CMD ["kernelgym", "healthcheck", "worker"]
ENTRYPOINT ["tini", "--"]
CMD ["kernelgym", "worker"]
