#!/usr/bin/env bash
# What a GPU machine without network access needs beyond its own torch and Triton to run the service, the
# GPU tests and bench/gpu_acceptance.sh: the project's pinned service-side packages as wheels for its Python,
# and a relocatable redis-server. Made on a machine with network access, used on the offline one.
#
#   bench/offline_bundle.sh make DIR [PYTHON_VERSION]   # here: DIR/wheels/*.whl, DIR/redis/redis-server
#   source bench/offline_bundle.sh use DIR              # there: installs into /tmp/kernelgym-site, sets
#                                                       # PYTHONPATH and PATH for this shell
#
# torch, Triton and numpy are the offline machine's own (the CUDA build that matches its driver); the wheels
# are installed without dependency resolution into a private directory, so nothing of the machine changes.
set -uo pipefail

# The service side of pyproject.toml (core schema, gateway, worker queue, client, RL client's local
# backend and tests), at the versions pinned there; pip adds what they depend on.
PACKAGES=(
    "pydantic==2.14.3" "pydantic-settings==2.16.3"
    "celery[redis]==5.7.0" "fastapi==0.165.0" "httpx==0.28.1" "prometheus-client==0.26.0"
    "python-json-logger==4.1.0" "redis==8.1.0" "uvicorn==0.54.0"
    "tenacity==9.2.1" "tqdm==4.70.1" "pyyaml==6.0.3" "pytest==9.2.0"
)

make_bundle() {
    local dir=$1 pyver=${2:-3.12}
    mkdir -p "$dir/wheels" "$dir/redis/lib"
    local platforms=()
    for n in 2_17 2_27 2_28 2_31 2_34 2_35 2_39; do platforms+=(--platform "manylinux_${n}_x86_64"); done
    python3 -m pip download -q --only-binary=:all: --python-version "$pyver" --implementation cp \
        "${platforms[@]}" --platform manylinux2014_x86_64 -d "$dir/wheels" "${PACKAGES[@]}" || return 1
    # redis-server and the shared libraries it links that are not the C runtime's own.
    local exe
    exe=$(readlink -f "$(command -v redis-server)") || { echo "redis-server not found" >&2; return 1; }
    cp "$exe" "$dir/redis/redis-server.bin"
    ldd "$exe" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
        xargs -I{} cp -L {} "$dir/redis/lib/"
    cat >"$dir/redis/redis-server" <<'EOF'
#!/bin/sh
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/redis-server.bin" "$@"
EOF
    chmod +x "$dir/redis/redis-server"
    du -sh "$dir"
}

use_bundle() {
    local dir site=/tmp/kernelgym-site
    dir=$(readlink -f "$1")
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
        "$dir"/wheels/*.whl || return 1
    export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}" PATH="$dir/redis:$site/bin:$PATH"
    redis-server --version
}

case ${1:-} in
make) make_bundle "${2:?DIR}" "${3:-3.12}" ;;
use) use_bundle "${2:?DIR}" ;;
*)
    echo "usage: bench/offline_bundle.sh make DIR [PYTHON_VERSION] | source bench/offline_bundle.sh use DIR" >&2
    false
    ;;
esac
