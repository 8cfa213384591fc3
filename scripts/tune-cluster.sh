#!/usr/bin/env bash
# tune-cluster.sh — the per-cluster CI job: probe -> tune -> diff against the previous profile of
# this cluster in the store -> publish.
#
# Run once per cluster (a GitHub Actions runner or a Slurm job on that cluster; see
# examples/github-tune.yml and examples/tune-cluster.sbatch). The store's bearer token comes
# from $PPTUNE_STORE_TOKEN and is never echoed. Everything the job made is left in --workdir
# (cluster.json, profile.json, report.html, previous.json, diff.txt, megatron-flags.txt) for the
# CI system to keep as artifacts (report.html: the search as one self-contained page, from
# pptune --report).
#
# Exit status: 0 published (or nothing to compare with: first run), 3 throughput dropped by more
# than --threshold percent (the new profile is NOT published unless --publish-regression),
# 1 a step failed, 2 bad usage.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: scripts/tune-cluster.sh --model M --store URL [options] [-- extra pptune search options]

  --model M              model preset (pptune models) to tune for
  --store URL            HTTP profile store (default $PPTUNE_STORE_URL)
  --cluster C            local (probe this machine, or inside a Slurm allocation every node
                         of it: one probe rank per node; default), a preset name, or a
                         cluster file
  --nodes N              nodes of a preset (a probed cluster has the nodes it was probed on;
                         see examples/tune-cluster.sbatch)
  --quick                quick probe (fewer sizes and repeats)
  --threshold PCT        largest tolerated throughput drop, percent (default 5)
  --publish-regression   publish even when throughput dropped past the threshold (exit 3 still)
  --workdir DIR          where the job's files go (default ./tune-out)
  --pptune PATH          the pptune program (default: pptune on PATH, else ./build/tuner/pptune)
EOF
}

model="" store="${PPTUNE_STORE_URL:-}" cluster="local" nodes="" quick=0 threshold=5
publish_regression=0 workdir="./tune-out" pptune=""
extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --model) model="${2:?--model needs a value}"; shift 2 ;;
        --store) store="${2:?--store needs a value}"; shift 2 ;;
        --cluster) cluster="${2:?--cluster needs a value}"; shift 2 ;;
        --nodes) nodes="${2:?--nodes needs a value}"; shift 2 ;;
        --quick) quick=1; shift ;;
        --threshold) threshold="${2:?--threshold needs a value}"; shift 2 ;;
        --publish-regression) publish_regression=1; shift ;;
        --workdir) workdir="${2:?--workdir needs a value}"; shift 2 ;;
        --pptune) pptune="${2:?--pptune needs a value}"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        --) shift; extra=("$@"); break ;;
        *) echo "tune-cluster: unknown option \"$1\"" >&2; usage >&2; exit 2 ;;
    esac
done
[[ -n "$model" ]] || { echo "tune-cluster: --model is required" >&2; exit 2; }
[[ -n "$store" ]] || { echo "tune-cluster: --store URL (or PPTUNE_STORE_URL) is required" >&2; exit 2; }
if [[ -z "$pptune" ]]; then
    pptune="$(command -v pptune || true)"
    [[ -n "$pptune" ]] || pptune="$(dirname "$0")/../build/tuner/pptune"
fi
[[ -x "$pptune" ]] || { echo "tune-cluster: pptune not found at \"$pptune\" (--pptune PATH)" >&2; exit 2; }

mkdir -p "$workdir"
cl="$workdir/cluster.json" new="$workdir/profile.json" prev="$workdir/previous.json"
rm -f "$prev" "$workdir/diff.txt"
step() { echo "== tune-cluster: $*" >&2; }

# 1. probe: describe the cluster; its fingerprint is the store key. Inside a Slurm allocation
#    `pptune probe` probes every node of it (one srun rank each) and warns when they differ.
step "probe ($cluster)"
if [[ "$cluster" == local ]]; then
    probe_args=(probe -o "$cl")
    [[ $quick == 1 ]] && probe_args+=(--quick)
    "$pptune" "${probe_args[@]}" >"$workdir/probe.txt"
elif [[ -f "$cluster" ]]; then
    "$pptune" probe --show "$cluster" >"$workdir/probe.txt"   # validates it
    [[ "$cluster" -ef "$cl" ]] || cp "$cluster" "$cl"
else
    "$pptune" probe --preset "$cluster" --nodes "${nodes:-1}" -o "$cl" >"$workdir/probe.txt"
fi

# 2. tune
step "tune $model"
tune_args=(--model "$model" --cluster "$cl" -o "$new" --report "$workdir/report.html")
"$pptune" "${tune_args[@]}" "${extra[@]}" >"$workdir/tune.txt"

# 3. diff against the previous profile of this cluster and model
step "fetch the previous profile from the store"
set +e
"$pptune" fetch --store "$store" --model "$model" --cluster "$cl" -o "$prev" >&2
fetch_rc=$?
set -e
regression=0
case $fetch_rc in
    0)
        step "diff (threshold $threshold %)"
        set +e
        "$pptune" diff --threshold "$threshold" "$prev" "$new" | tee "$workdir/diff.txt"
        diff_rc=${PIPESTATUS[0]}
        set -e
        case $diff_rc in
            0) ;;
            3) regression=1 ;;
            *) echo "tune-cluster: diff failed (exit $diff_rc)" >&2; exit 1 ;;
        esac ;;
    4) step "no previous profile for this cluster and model: first run" ;;
    *) echo "tune-cluster: could not fetch the previous profile (exit $fetch_rc)" >&2; exit 1 ;;
esac

"$pptune" export --format megatron "$new" >"$workdir/megatron-flags.txt" 2>&1 || true

# 4. publish
if [[ $regression == 1 && $publish_regression == 0 ]]; then
    echo "tune-cluster: throughput dropped more than $threshold %: NOT published (the previous" \
         "profile stays in the store; --publish-regression to publish anyway)" >&2
    exit 3
fi
step "publish"
"$pptune" publish "$new" --store "$store"
[[ $regression == 1 ]] && exit 3
exit 0
