#!/usr/bin/env bash
# install-deps.sh — installs the Debian 12 packages pptune builds and tests with. Idempotent:
# installs only what is missing, and does nothing (no network) when everything is present.
# The CUDA toolkit is optional and not installed here: where nvcc is on PATH (or in
# /usr/local/cuda/bin) the CUDA parts are built, elsewhere they are skipped.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libhwloc-dev hwloc-nox        # topology probe (hwloc 2.x) and lstopo for checking fixtures
  libjansson-dev                # JSON: cluster files, schedules, profiles
  libopenblas-dev               # CPU backend GEMMs
  libcurl4-openssl-dev          # HTTP profile store
  libcriterion-dev              # tests
  libopenmpi-dev openmpi-bin    # multi-process runs and probes under mpirun
  slurm-wlm munge               # the slurm suite's 4-node Slurm on this host (tests/slurm/)
  python3                       # test helpers (local HTTP server)
  python3-yaml                  # tests/fixtures/export/check.py reads the NeMo YAML export
  python3-venv                  # tests/py/venv.sh: the interop tests' packages from PyPI
  chromium                      # renders the HTML report headless in its test (skipped without it)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
