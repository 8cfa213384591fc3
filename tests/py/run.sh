#!/usr/bin/env bash
# run.sh SET SCRIPT ARGS... — runs tests/py/SCRIPT with the Python of venv.sh SET (exit 77, a
# skip, only where PyPI cannot be reached). What ctest calls for the tests/py/ suites.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
set=$1 script=$2
shift 2
py=$("$here/venv.sh" "$set") || exit $?
exec "$py" "$here/$script" "$@"
