#!/usr/bin/env bash
# startup.sh BUILD_DIR — pptune starts with only what it needs (issue 25): no CUDA, NCCL, MPI or
# BLAS library among its load-time dependencies; `pptune --help` and a small search return under
# a login node's address-space limit (ulimit -v 1000000); the probe plugins (probes/plugin.h)
# are found next to an installed pptune, and a probe whose plugins are missing, or whose
# plugin's own library is missing, says which and where, and exits as documented (1 when it
# cannot measure; 0 with "no GPU" when only the GPU plugin cannot be loaded).
# PP_STARTUP_NO_ULIMIT=1 (sanitizer builds: their shadow memory needs terabytes of address
# space) skips the ulimit checks, saying so.
set -u
build=$(cd "${1:?usage: startup.sh BUILD_DIR}" && pwd)
pptune=$build/tuner/pptune
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_DATA_HOME=$tmp/data # the search writes its profile here
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# 1. load-time dependencies
needed=$(readelf -d "$pptune" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || fail "readelf -d $pptune lists no NEEDED library (not a dynamic executable?)"
bad=$(echo "$needed" | grep -Ei 'cuda|cublas|nccl|mpi|blas|lapack|gfortran' || true)
if [ -n "$bad" ]; then fail "pptune links at load time: $(echo $bad)"; else ok "NEEDED: $(echo $needed)"; fi
# and nothing it loads pulls one in (ldd: the whole closure)
bad=$(ldd "$pptune" 2>&1 | grep -Ei 'cuda|cublas|nccl|libmpi|blas|lapack|gfortran' || true)
if [ -n "$bad" ]; then fail "ldd pptune loads: $(echo $bad)"; else ok "ldd: no CUDA, NCCL, MPI or BLAS library"; fi

# 2. --help and a small search under a login node's address-space limit
if [ "${PP_STARTUP_NO_ULIMIT:-0}" = 1 ]; then
    echo "skipped: ulimit -v checks (PP_STARTUP_NO_ULIMIT=1: a sanitizer build)"
else
    out=$( (ulimit -v 1000000 && timeout 30 "$pptune" --help) 2>&1)
    rc=$?
    if [ $rc -ne 0 ] || ! echo "$out" | grep -q '^usage: pptune'; then
        fail "ulimit -v 1000000; pptune --help: exit $rc: $(echo "$out" | tail -2)"
    else ok "ulimit -v 1000000; pptune --help"; fi
    out=$( (ulimit -v 1000000 && timeout 120 "$pptune" --model gpt-125m --nodes 1 --top 3) 2>&1)
    rc=$?
    if [ $rc -ne 0 ] || ! echo "$out" | grep -q '^launch: pprun'; then
        fail "ulimit -v 1000000; pptune --model gpt-125m --nodes 1: exit $rc: $(echo "$out" | tail -3)"
    else ok "ulimit -v 1000000; a search of gpt-125m on one preset node"; fi
fi

# 3. no plugin where PPTUNE_PLUGIN_DIR points: the GPU probe says "no GPU", the CPU one cannot
# measure its BLAS, exit 1, both naming the file and the folder
err=$(PPTUNE_PLUGIN_DIR=$tmp/none timeout 120 "$pptune" probe --quick 2>&1 >/dev/null)
rc=$?
[ $rc -eq 1 ] || fail "probe with PPTUNE_PLUGIN_DIR=$tmp/none: exit $rc, expected 1"
echo "$err" | grep -q "no CUDA device: .*describing the CPU cores instead" ||
    fail "probe with no plugins: no 'no CUDA device ... describing the CPU cores' line: $err"
echo "$err" | grep -q "^pptune probe: .*plugin pptune-blas.so not found (looked in \$PPTUNE_PLUGIN_DIR: $tmp/none)" ||
    fail "probe with no plugins: the error does not name pptune-blas.so and the folder: $err"
[ $rc -eq 1 ] && [ $fails -eq 0 ] && ok "probe without plugins: exit 1, $(echo "$err" | tail -1)"

# 4. a GPU plugin whose own library (as libcudart.so.13 would be) is missing: the probe describes
# the CPU cores (exit 0) and says which library; --require-gpu fails (exit 1) with the same
plug=$tmp/plugins
mkdir -p "$plug"
cp "$build/lib/pptune/pptune-blas.so" "$plug/"
echo 'int pp_fake_cudart;' >"$tmp/fake.c"
cc -shared -fPIC -o "$tmp/libpp_fake_cudart.so" "$tmp/fake.c" &&
    cc -shared -fPIC -o "$plug/pptune-gpu.so" "$tmp/fake.c" -Wl,--no-as-needed -L"$tmp" -lpp_fake_cudart &&
    rm "$tmp/libpp_fake_cudart.so" || fail "cannot build the stand-in GPU plugin with cc"
if [ -f "$build/lib/pptune/pptune-gpu.so" ]; then
    err=$(PPTUNE_PLUGIN_DIR=$plug timeout 120 "$pptune" probe --quick 2>&1 >"$tmp/probe.txt")
    rc=$?
    if [ $rc -ne 0 ]; then fail "probe with a GPU plugin missing its library: exit $rc: $err"
    elif ! grep -q "^note: no GPU" "$tmp/probe.txt"; then fail "probe: no 'no GPU' note: $(cat "$tmp/probe.txt")"
    elif ! echo "$err" | grep -q "cannot load $plug/pptune-gpu.so: libpp_fake_cudart.so: cannot open shared object file"; then
        fail "probe: the missing library is not named: $err"
    else ok "probe with the GPU plugin's library missing: exit 0, no GPU, $(echo "$err" | grep -o 'cannot load[^(]*')"; fi
    err=$(PPTUNE_PLUGIN_DIR=$plug timeout 60 "$pptune" probe --require-gpu 2>&1 >/dev/null)
    rc=$?
    [ $rc -eq 1 ] && echo "$err" | grep -q "^pptune probe: no CUDA device: cannot load .*libpp_fake_cudart.so" ||
        fail "probe --require-gpu with the library missing: exit $rc: $err"
else
    echo "skipped: the GPU plugin's missing library (this build has no CUDA, so no GPU plugin)"
fi

# 5. make install: bin/pptune finds <prefix>/lib/pptune before the build tree (a stand-in BLAS
# plugin installed over the real one shows which folder was searched first)
if cmake --install "$build" --prefix "$tmp/inst" >"$tmp/install.log" 2>&1; then
    [ -x "$tmp/inst/bin/pptune" ] && [ -x "$tmp/inst/bin/pprun" ] &&
        [ -f "$tmp/inst/lib/pptune/pptune-blas.so" ] ||
        fail "make install: no bin/pptune, bin/pprun or lib/pptune/pptune-blas.so under $tmp/inst"
    cp "$plug/pptune-gpu.so" "$tmp/inst/lib/pptune/pptune-blas.so"
    err=$(env -u PPTUNE_PLUGIN_DIR timeout 120 "$tmp/inst/bin/pptune" probe --quick 2>&1 >/dev/null)
    rc=$?
    if [ $rc -ne 1 ] || ! echo "$err" | grep -q "cannot load $tmp/inst/bin/../lib/pptune/pptune-blas.so: libpp_fake_cudart.so"; then
        fail "installed pptune probe: exit $rc, not its own lib/pptune: $err"
    else ok "installed pptune loads its plugins from <prefix>/lib/pptune"; fi
else
    fail "cmake --install: $(tail -3 "$tmp/install.log")"
fi

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all startup checks passed"
