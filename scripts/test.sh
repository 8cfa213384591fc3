#!/usr/bin/env bash
# test.sh — on a fresh Debian 12 machine: install what is missing, build, run every test suite;
# build the Release (-O3) configuration warning-free; then build the tests again with
# AddressSanitizer + UndefinedBehaviorSanitizer and run them.
# The second pass includes the bounded mutation fuzz pass of every reader (ctest label fuzz,
# tests/fuzz/). Set PP_SKIP_SANITIZE=1 to skip the second pass while iterating.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
"$root/scripts/install-deps.sh"

echo "== build and test (warnings as errors)"
"$root/scripts/build.sh" "$root/build"
# the mutation fuzz pass (label fuzz) runs once, in the sanitizer pass below, where it counts
(cd "$root/build" && ctest --output-on-failure -j "$jobs" -LE fuzz)

echo "== build Release (-O3: more of GCC's flow warnings, as errors; host code, not run)"
# users build Release; -O3's inlining makes GCC warn where -O2 does not (stringop, maybe-
# uninitialized), so the warning-free state is checked here too (about 30 s on 2 cores)
"$root/scripts/build.sh" "$root/build-release" -DCMAKE_BUILD_TYPE=Release -DPP_CUDA=OFF

if [ "${PP_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== build and test with ASan + UBSan"
  # CUDA code is compile-checked in the first pass; the sanitizer pass covers the host code.
  # the Python tests' venv (tests/py/venv.sh) lives under build/py-venv for both passes
  "$root/scripts/build.sh" "$root/build-asan" -DPP_SANITIZE=ON -DPP_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug
  # intercept_tls_get_addr=0: GCC 12's LeakSanitizer (Debian 12) reads a bogus dynamic-TLS
  # range of the main thread after pptune's in-process probe of this machine and its tracer
  # dies with SIGSEGV ("Tracer caught signal 11 ... DTLS 10 at 0x176-0x400001278") at exit, a
  # crash of the leak checker itself, not a finding; without the interception LSan skips only
  # the dynamic TLS of dlopen'ed libraries (seen with tests/fixtures/hf/tiny-qwen3.json on a
  # --cluster local search; every other check stays on)
  (cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$jobs")
fi
echo "== all tests passed"
