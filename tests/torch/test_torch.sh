#!/usr/bin/env bash
# test_torch.sh BUILD_DIR — pptune's schedules against PyTorch pipelining's own code (ctest
# "torch"): torch 2.15 from the Python package index in the interop venv (tests/py/venv.sh
# interop: made once, shared with the format tests; a skip, exit 77, with a loud message only
# when the index cannot be reached), then
#   csv_interop.py  torch's _load_csv on every schedule's CSV in both forms, torch's _dump_csv of
#                   every schedule class it has read by `pptune schedule --check`, DualPipeV's
#                   makespans against torch's simulator, the torch fixtures of the C tests;
#   gloo_step.py    pptune's CSVs run in torch's _PipelineScheduleRuntime on two gloo processes
#                   (127.0.0.1), gradients equal to the unpipelined step's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: test_torch.sh BUILD_DIR}
rc=0
py=$("$here/../py/venv.sh" interop) || rc=$?
[ "$rc" -eq 0 ] || exit "$rc" # 77: skipped, said why
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PYTHONWARNINGS="ignore:Failed to initialize NumPy"
"$py" "$here/csv_interop.py" "$build/tuner/pptune" "$work/csv"
"$py" "$here/gloo_step.py" "$build/tuner/pptune" "$work/gloo"
echo "test_torch.sh: torch $("$py" -c 'import torch; print(torch.__version__)'): all passed"
