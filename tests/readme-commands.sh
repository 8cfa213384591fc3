#!/usr/bin/env bash
# readme-commands.sh BUILD_DIR README — runs the commands the README shows, as written: every line
# of its ```sh blocks and every "$ pptune ..." / "$ pprun ..." line of its other blocks (```text
# blocks are synopses with placeholders and are not run). A line ending in "# not run: WHY" is
# listed and skipped (it builds, installs or needs what a test machine lacks). The commands run in
# a fresh directory (with `build` linked to BUILD_DIR, pptune and pprun on PATH, a private
# profile store), one after the other, so a later one may use what an earlier one wrote. Exits 1
# naming the first command that failed, with its output.
set -u
build=$(cd "$1" && pwd)
readme=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$build" "$work/build"
export PATH="$build/tuner:$build/runtime:$PATH" XDG_DATA_HOME="$work/xdg"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # root in containers
commands=$(awk '
  /^```/ { if (inblock) { inblock = 0; next } inblock = 1; sh = ($0 ~ /^```(sh|bash)$/); next }
  inblock && sh && NF && $1 != "#" { print; next }
  inblock && !sh && /^\$ (pptune|pprun) / { sub(/^\$ /, ""); print }
' "$readme")
ran=0 skipped=0
while IFS= read -r line; do
  [ -n "$line" ] || continue
  if [[ $line =~ \#\ not\ run:\ (.*)$ ]]; then
    echo "skipped: ${line%%#*}(${BASH_REMATCH[1]})"
    skipped=$((skipped + 1))
    continue
  fi
  cmd=${line%%  #*} # the README's trailing comment is not part of the command
  echo "running: $cmd"
  if ! out=$(cd "$work" && bash -o pipefail -c "$cmd" 2>&1 < /dev/null); then
    echo "README command failed: $cmd"
    echo "$out" | tail -20
    exit 1
  fi
  ran=$((ran + 1))
done <<< "$commands"
echo "readme-commands: $ran commands ran, $skipped marked not run"
[ "$ran" -gt 0 ] || { echo "readme-commands: no command found in $readme"; exit 1; }
