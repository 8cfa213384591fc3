#!/usr/bin/env bash
# quickstart.sh — on a fresh Debian 12 machine: install what is missing, build, run the main job:
# the search for gpt-13b on 32 nodes. Without GPUs here, the cluster is the dgx-h100 preset
# (public specifications) and every figure is predicted; the profile lands in the local store.
# Extra arguments go to pptune (e.g. --cluster hgx-h200, --explain).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build"
"$root/build/tuner/pptune" --model gpt-13b --nodes 32 "$@"
