#!/usr/bin/env bash
# fuzz-libfuzzer.sh [SECONDS] [TARGET...] — coverage-guided fuzzing of pptune's readers with
# libFuzzer, for developers (CI runs the bounded mutation pass instead: ctest -L fuzz).
#
# Targets (tests/fuzz/*_fuzz.c): sched (text, JSON and CSV schedules), cluster, profile, model,
# hf (HuggingFace config.json), safetensors (a checkpoint file and a sharded index), megatron
# (an indexed dataset's .idx and .bin); all seven by default. Each runs for SECONDS (default
# 60) under
# ASan + UBSan, with a 10 s per-input timeout, a 512 MB allocation limit and a 2 GB RSS limit.
# The corpus starts from the seeds of the CI pass (pp_fuzz_mutate --write-seeds) and grows in
# build-libfuzzer/corpus/TARGET; findings (crash-*, leak-*, timeout-*, oom-*) land in
# build-libfuzzer/findings/TARGET. Reproduce one with: build-libfuzzer/tests/fuzz/TARGET_fuzz FILE
# Installs clang with apt-get when it is missing (developer machines only; not in install-deps).
# Environment: PP_FUZZ_BUILD (the build folder).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(sched cluster profile model hf safetensors megatron)
build=${PP_FUZZ_BUILD:-$root/build-libfuzzer}
case "$seconds" in '' | *[!0-9]*) echo "fuzz-libfuzzer.sh: SECONDS must be a whole number, got \"$seconds\"" >&2; exit 2 ;; esac
for t in "${targets[@]}"; do
  case "$t" in sched | cluster | profile | model | hf | safetensors | megatron) ;;
  *) echo "fuzz-libfuzzer.sh: unknown target \"$t\" (sched, cluster, profile, model, hf, safetensors, megatron)" >&2; exit 2 ;;
  esac
done

if ! command -v clang >/dev/null; then
  echo "== installing clang (libFuzzer)"
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq clang
fi

echo "== building the libFuzzer targets in $build"
# fuzzer-no-link instruments the libraries for coverage; the targets link libFuzzer itself.
# No -Werror: the project's warning gate is gcc's; clang may warn differently.
CC=clang cmake -S "$root" -B "$build" -DPP_SANITIZE=ON -DPP_CUDA=OFF -DPP_CUDA_EMU=OFF \
  -DPP_LIBFUZZER=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" \
  >/dev/null
jobs=$(nproc 2>/dev/null || echo 2)
cmake --build "$build" -j "$jobs" --target pp_fuzz_mutate $(printf '%s_fuzz ' "${targets[@]}") \
  >"$build/fuzz-build.log" 2>&1 || { tail -30 "$build/fuzz-build.log"; exit 1; }

seeds="$build/seeds"
rm -rf "$seeds"
"$build/tests/fuzz/pp_fuzz_mutate" --write-seeds "$seeds" --work "$build" \
  --pprun "$build/runtime/pprun" >/dev/null 2>&1 || true

status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t" findings="$build/findings/$t"
  mkdir -p "$corpus" "$findings"
  case "$t" in
  sched) cp "$seeds"/sched-*/* "$corpus"/ 2>/dev/null || true ;;
  safetensors) cp "$seeds"/safetensors*/* "$corpus"/ 2>/dev/null || true ;;
  megatron) cp "$seeds"/megatron-*/* "$corpus"/ 2>/dev/null || true ;;
  *) cp "$seeds/$t"/* "$corpus"/ 2>/dev/null || true ;;
  esac
  echo "== $t: ${seconds} s"
  log="$build/findings/$t.log"
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$build/tests/fuzz/${t}_fuzz" "$corpus" -max_total_time="$seconds" -timeout=10 \
    -malloc_limit_mb=512 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$findings/" \
    >"$log" 2>&1 || true
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{s += $2} END {print s + 0}')
  found=$(find "$findings" -maxdepth 1 -type f | wc -l)
  echo "   $runs executions, corpus $(find "$corpus" -type f | wc -l) inputs, $found finding(s) (log: $log)"
  if [ "$found" -gt 0 ]; then
    status=1
    find "$findings" -maxdepth 1 -type f | sed 's/^/   finding: /'
  fi
done
exit $status
