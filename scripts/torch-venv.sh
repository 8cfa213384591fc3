#!/usr/bin/env bash
# torch-venv.sh DIR — makes sure DIR is a Python virtual environment holding PyTorch at the
# version pptune's interop is tested against (torch==$PP_TORCH_VERSION, default 2.15.0, from
# the Python package index pip is configured with), installing it the first time, and prints
# DIR/bin/python. The tests that run PyTorch's own code (tests/torch/) and
# scripts/bench-vs-torch.sh call it; a clean clone installs once per build directory and every
# later run finds it (the stamp file DIR/.pptune-torch-VERSION is written last, so an
# interrupted install is redone, not trusted).
#
# Exit status: 0 ready; 77 the package index cannot be reached (the caller skips, and this
# says so loudly on stderr); 1 the install failed with the index reachable (a real failure).
# The install is about 5 GB (torch's Linux wheel pulls the CUDA libraries it links against,
# though the tests run on the CPU) and takes about two minutes on a 2-core machine; a lock
# (DIR.lock) keeps two tests from installing it at once.
set -euo pipefail
dir=${1:?usage: torch-venv.sh DIR}
version=${PP_TORCH_VERSION:-2.15.0}
numpy=2.4.6 # torch.distributed's object send (the stages' shape exchange) needs it; torch does not list it
stamp=$dir/.pptune-torch-$version
ready() { [ -f "$stamp" ] && "$dir/bin/python" -c 'import torch' 2>/dev/null; }
if ready; then
  echo "$dir/bin/python"
  exit 0
fi
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock 9
if ready; then # another test installed it while this one waited
  echo "$dir/bin/python"
  exit 0
fi
if ! python3 -m pip index versions torch >/dev/null 2>&1; then
  {
    echo "torch-venv.sh: ============================================================"
    echo "torch-venv.sh: SKIPPED: the Python package index cannot be reached, so torch"
    echo "torch-venv.sh: $version cannot be installed into $dir; the tests that run"
    echo "torch-venv.sh: PyTorch pipelining's own code do not run on this machine."
    echo "torch-venv.sh: ============================================================"
  } >&2
  exit 77
fi
rm -rf "$dir"
start=$(date +%s)
echo "torch-venv.sh: installing torch==$version into $dir (about 5 GB, once)" >&2
python3 -m venv "$dir"
if ! "$dir/bin/python" -m pip install -q "torch==$version" "numpy==$numpy" >&2; then
  echo "torch-venv.sh: pip install torch==$version failed (the index is reachable)" >&2
  exit 1
fi
"$dir/bin/python" -c 'import torch, torch.distributed as d; assert d.is_gloo_available()' >&2
echo "installed $(date -u +%FT%TZ) in $(($(date +%s) - start)) s" >"$stamp"
echo "torch-venv.sh: torch==$version ready in $(($(date +%s) - start)) s" >&2
echo "$dir/bin/python"
