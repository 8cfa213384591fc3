#!/usr/bin/env bash
# quickstart.sh — on a fresh Debian 12 machine: install what is missing, build, run the main job.
# Until the search lands (issue 5), the main job shows the seed article's example schedule:
# Megatron's interleaved 1F1B on 4 ranks, 2 chunks each, 8 micro-batches (bubble 18.75 % of ideal).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build"
"$root/build/tuner/pptune" schedule --kind interleaved --ranks 4 --microbatches 8 --chunks 2 "$@"
