#!/usr/bin/env bash
# build.sh [BUILD_DIR] [extra cmake args...] — configure and build pptune (Release-ish, warnings
# as errors). CUDA parts are built where nvcc exists (PATH or /usr/local/cuda/bin).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$root" -B "$build" -DPP_WERROR=ON "$@" >/dev/null
cmake --build "$build" -j "$jobs"
