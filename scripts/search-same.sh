#!/usr/bin/env bash
# search-same.sh OLD_PPTUNE NEW_PPTUNE [WORKDIR]
# Runs the same searches with two pptune binaries and compares what a user sees: the report
# with --explain=all (leaderboard, header, every rejected candidate with its reason, each
# schedule's best, the Pareto front) and the profile, byte for byte but for the search's own
# wall time (the "searched N candidates in X s" line and the profile's wall_s) and its schedule
# cache's hit count (both measure the search's own work), the profile's creation time and the
# generator's git revision. Exit 0 when
# every search is the same, 1 with the first differing lines otherwise.
# Searches: the main job (gpt-13b on 32 dgx-h100 nodes), llama3-405b on 2,048 nodes,
# Megatron-LM's 1T row (Narayanan et al. 2021, arXiv:2104.04473, Table 1: h 25600, 128 layers,
# 160 heads, batch 3072) on 384 dgx-a100-80g nodes, Mixtral 8x7B's config.json (the search of
# ep), forced settings, --for megatron, and a CPU cluster probed once here (fp32, the
# runtime's memory plan; no trials). Used to show that a change to the search's speed
# changes no result (README, Benchmarks).
set -euo pipefail
old=${1:?usage: search-same.sh OLD_PPTUNE NEW_PPTUNE [WORKDIR]}
new=${2:?usage: search-same.sh OLD_PPTUNE NEW_PPTUNE [WORKDIR]}
here=$(cd "$(dirname "$0")/.." && pwd)
work=${3:-$(mktemp -d /tmp/search-same.XXXXXX)}
mkdir -p "$work/old" "$work/new"

cat > "$work/gpt-1t.json" <<'EOF'
{"format": "pptune-model", "version": 1, "name": "gpt-1t", "layers": 128, "hidden": 25600,
 "heads": 160, "ffn": 102400, "vocab": 51200, "seq": 2048, "global_batch": 3072}
EOF
if [ ! -f "$work/cpu-cluster.json" ]; then
    "$new" probe --quick -o "$work/cpu-cluster.json" > /dev/null 2>&1
fi

searches=(
    "--model gpt-13b --nodes 32"
    "--model llama3-405b --nodes 2048"
    "--model-file $work/gpt-1t.json --cluster dgx-a100-80g --nodes 384"
    "--model-config $here/tests/fixtures/hf/mixtral-8x7b-v0.1.json --nodes 64"
    "--model gpt-13b --nodes 32 --recompute full --sequence-parallel --shard optimizer"
    "--model llama3-70b --nodes 64 --for megatron --keep 40 --top 40"
    "--model small --seq 128 --cluster $work/cpu-cluster.json --trials 0"
)
# the search's own work may differ (its wall time, and its schedule cache's hits), nothing else
strip() { sed -E -e 's/(searched [0-9]+ candidates in )[0-9.]+ s/\1X s/' \
                 -e 's/("wall_s": )[0-9.e+-]+/\1X/' -e 's/("created": )"[^"]*"/\1X/' \
                 -e 's/(schedule cache hits )[0-9]+/\1X/' -e 's/("schedule_cache_hits": )[0-9]+/\1X/' \
                 -e 's/("generator": "pptune [0-9.]+)( \(git [0-9a-f]+(-dirty)?\))?"/\1"/'; }
fail=0
i=0
for args in "${searches[@]}"; do
    i=$((i + 1))
    for which in old new; do
        bin=$old
        [ "$which" = new ] && bin=$new
        # shellcheck disable=SC2086
        # the same profile path for both (the report names it)
        "$bin" $args --explain=all -o "$work/profile.json" \
            > "$work/$which/$i.out" 2> "$work/$which/$i.err" || echo "exit $?" >> "$work/$which/$i.err"
        strip < "$work/$which/$i.out" > "$work/$which/$i.out.s"
        strip < "$work/profile.json" > "$work/$which/$i.profile.s" 2>/dev/null || true
        rm -f "$work/$which/$i.out" "$work/profile.json"
    done
    same=1
    for f in out.s profile.s err; do
        if ! cmp -s "$work/old/$i.$f" "$work/new/$i.$f"; then
            same=0
            echo "DIFFERS ($f): pptune $args"
            diff "$work/old/$i.$f" "$work/new/$i.$f" | head -10 || true
        fi
    done
    if [ $same = 1 ]; then
        echo "same ($(wc -l < "$work/new/$i.out.s") lines): pptune $args"
    else
        fail=1
    fi
done
exit $fail
