#!/usr/bin/env bash
# venv.sh SET — prints the path of a Python that has the packages pinned in tests/py/SET.txt (a
# pip requirements file), from a virtual environment made once and kept:
#   ${PP_PY_VENV_ROOT:-<repo>/build/py-venv}/SET
# shared by every build folder (the plain and the sanitizer pass use one). It is made again when
# SET.txt changes (its SHA-256 is kept in the venv as .pp-stamp). Concurrent callers wait for
# each other (flock). The install log is SET.log beside the venv; the time it took goes to
# stderr.
#
# Exit 0 with the path on stdout; 77 (ctest's skip, said loudly on stderr) when PyPI cannot be
# reached; 1 when the venv cannot be made or pip fails with PyPI reachable (a broken pin is a
# failure, not a skip). Python: $PP_PYTHON, else python3 (Debian 12 needs python3-venv,
# scripts/install-deps.sh installs it).
#
# A test script uses it as:   py=$(tests/py/venv.sh interop) || exit $?
# A new set is a new tests/py/NAME.txt; add to an existing set rather than make a second copy of
# a large package (torch). A set whose file has the line "# venv.sh base: BASE" is layered on set
# BASE: its venv sees BASE's packages through a .pth file (made first, by this script), pip
# installs only what BASE lacks, constrained to BASE's pins (a "-c BASE.txt" line in the file),
# and its stamp covers both files. BASE's venv is left as it is, so a new set never makes the
# venvs that others use be rebuilt (hf.txt: transformers on top of interop's torch).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
set=${1:?usage: venv.sh SET (a requirements file tests/py/SET.txt)}
req=$here/$set.txt
[ -f "$req" ] || { echo "venv.sh: no requirements file $req" >&2; exit 1; }
venvs=${PP_PY_VENV_ROOT:-$root/build/py-venv}
venv=$venvs/$set
python=${PP_PYTHON:-python3}
mkdir -p "$venvs"
exec 9>"$venvs/$set.lock"
flock 9
base=$(sed -n 's/^# venv.sh base: *\([A-Za-z0-9_-]*\).*$/\1/p' "$req" | head -1)
base_py=
if [ -n "$base" ]; then
  base_py=$("$here/venv.sh" "$base") || exit $?
fi
stamp=$(cat "$req" ${base:+"$here/$base.txt"} | sha256sum | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.pp-stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
log=$venvs/$set.log
if ! "$python" -m venv "$venv" >"$log" 2>&1; then
  echo "venv.sh: $python -m venv $venv failed (on Debian: apt-get install python3-venv); see $log" >&2
  exit 1
fi
if [ -n "$base_py" ]; then
  base_site=$("$base_py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  own_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$base_site" >"$own_site/pp-base-$base.pth"
fi
start=$(date +%s)
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$req" \
  >>"$log" 2>&1; then
  if ! "$venv/bin/python" -m pip index versions pip --disable-pip-version-check >/dev/null 2>&1; then
    rm -rf "$venv"
    echo "venv.sh: SKIPPED: PyPI cannot be reached to install $req (see $log)" >&2
    exit 77
  fi
  tail -20 "$log" >&2
  rm -rf "$venv"
  echo "venv.sh: pip install -r $req failed with PyPI reachable (log: $log)" >&2
  exit 1
fi
echo "$stamp" >"$venv/.pp-stamp"
echo "venv.sh: made $venv from $set.txt in $(($(date +%s) - start)) s" >&2
echo "$venv/bin/python"
