#!/usr/bin/env bash
# bench-vs-torch.sh [BUILD_DIR] — pprun's CPU step against a PyTorch loop of the same GPT
# (bench/torch_gpt.py), and two pipeline ranks against the 1F1B bound of their split
# (bench/pipeline_bound.py, from pprun's own trace). A benchmark: it prints figures, asserts none.
#
#   1. one rank, every core (pprun's default BLAS threads: cores / ranks) vs PyTorch with as many
#      threads (torch.set_num_threads), models small and gpt-125m: ratio = PyTorch / pprun step;
#   2. two ranks (1F1B, one BLAS thread each on two cores) with the even split and shifts of 1
#      and 2 layers off the last stage (the head's): the fastest, its 1F1B bound, their ratio;
#   3. the Llama block (RMSNorm, SwiGLU, rotary with Llama 3 scaling, untied head; a
#      config.json through pprun --model-config) against the GPT block of the same size: the
#      same layers, width and heads, SwiGLU's width F with 3CF = 8C^2 (the GPT MLP's 8C^2
#      weights; 344 for small's C = 128, 2048 for gpt-125m's 768), KV_HEADS key/value heads
#      (default: as many as query heads, so that attention costs the same), one rank, tokens/s.
# BLOCKS_ONLY=1 runs part 3 alone (no PyTorch needed); PARTS ("1 2 3") picks the parts.
# Every figure is the minimum over REPEATS runs of each run's median step (steps after the
# first). torch is the tests': tests/py/venv.sh interop installs it (pinned) into
# build/py-venv/interop the first time, or finds it there.
# Environment: REPEATS (3), STEPS (5), MB micro-batches (4), SEQ tokens (64), THREADS (pprun
# --threads: BLAS and kernel threads; default the usable cores), MODELS ("small gpt-125m").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
pprun=$build/runtime/pprun
REPEATS=${REPEATS:-3} STEPS=${STEPS:-5} MB=${MB:-4} SEQ=${SEQ:-64}
THREADS=${THREADS:-$(nproc)} MODELS=${MODELS:-"small gpt-125m"} PARTS=${PARTS:-"1 2 3"}
want() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
[ -x "$pprun" ] || { echo "bench-vs-torch.sh: build pprun first ($pprun)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
field() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
minof() { printf '%s\n' "$@" | sort -g | head -1; }

# 3. Llama block vs GPT block of the same size (pprun only)
blocks() {
  printf '\n%-9s %-28s %12s %12s %12s\n' model block step_s tokens_per_s llama/gpt
  for m in $MODELS; do
    read -r L C H V F < <("$pprun" --model "$m" --ranks 1 --steps 1 --quiet --json --seq 8 |
      python3 -c "import json,sys; d=json.load(sys.stdin)['model']
print(d['layers'], d['hidden'], d['heads'], d['vocab'], round(8 * d['hidden'] / 3 / 8) * 8)")
    kv=${KV_HEADS:-$H}
    cat >"$tmp/$m-llama.json" <<JSON
{"model_type": "llama", "hidden_act": "silu", "num_hidden_layers": $L, "hidden_size": $C,
 "num_attention_heads": $H, "num_key_value_heads": $kv, "intermediate_size": $F,
 "vocab_size": $V, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
 "rope_theta": 500000.0, "tie_word_embeddings": false,
 "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
JSON
    declare -A best=()
    for which in gpt llama; do
      args=(--model "$m")
      [ "$which" = llama ] && args=(--model-config "$tmp/$m-llama.json")
      r=()
      for _ in $(seq "$REPEATS"); do
        r+=("$(env -u OPENBLAS_NUM_THREADS "$pprun" "${args[@]}" --ranks 1 --microbatches "$MB" \
               --seq "$SEQ" --steps "$STEPS" --threads "$THREADS" --quiet --json |
               field median_step_seconds)")
      done
      best[$which]=$(minof "${r[@]}")
    done
    tok=$((MB * SEQ))
    printf '%-9s %-28s %12.4f %12.0f\n' "$m" "GPT (ffn $((4 * C)))" "${best[gpt]}" \
           "$(python3 -c "print($tok / ${best[gpt]})")"
    printf '%-9s %-28s %12.4f %12.0f %11.2fx\n' "$m" "Llama (ffn $F, $kv KV heads)" \
           "${best[llama]}" "$(python3 -c "print($tok / ${best[llama]})")" \
           "$(python3 -c "print(${best[gpt]} / ${best[llama]})")"
  done
}
[ "${BLOCKS_ONLY:-0}" = 1 ] && PARTS=3
if ! want 1 && ! want 2; then
  echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); minimum of $REPEATS runs," \
       "steps $STEPS, micro-batches $MB x 1 sequence of $SEQ tokens, fp32, $THREADS BLAS and kernel threads"
  blocks
  exit 0
fi
py=$("$root/tests/py/venv.sh" interop)

echo "machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load" \
     "$(cut -d' ' -f1-3 /proc/loadavg) (shared: figures are noisy; minimum of $REPEATS runs)"
echo "torch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null)," \
     "steps $STEPS, micro-batches $MB x 1 sequence of $SEQ tokens, fp32"
want 1 && printf '\n%-9s %8s %12s %12s %9s\n' model threads pprun_s torch_s torch/pprun
want 1 && for m in $MODELS; do
  p=() t=()
  for _ in $(seq "$REPEATS"); do
    p+=("$(env -u OPENBLAS_NUM_THREADS "$pprun" --model "$m" --ranks 1 --microbatches "$MB" \
           --seq "$SEQ" --steps "$STEPS" --threads "$THREADS" --quiet --json |
           field median_step_seconds)")
    t+=("$("$py" "$root/bench/torch_gpt.py" --model "$m" --microbatches "$MB" --seq "$SEQ" \
           --steps "$STEPS" --threads "$THREADS" 2>/dev/null | field median_step_seconds)")
  done
  pm=$(minof "${p[@]}") tm=$(minof "${t[@]}")
  printf '%-9s %8d %12.4f %12.4f %8.2fx\n' "$m" "$THREADS" "$pm" "$tm" \
         "$(python3 -c "print($tm / $pm)")"
done

want 2 && printf '\n%-9s %-7s %12s %12s %12s %11s\n' model split two_ranks_s bound_s measured/bnd \
       vs_one_rank
want 2 && for m in $MODELS; do
  L=$("$pprun" --model "$m" --ranks 1 --steps 1 --quiet --json --seq 8 | \
      python3 -c "import json,sys; print(json.load(sys.stdin)['model']['layers'])")
  one=$(env -u OPENBLAS_NUM_THREADS "$pprun" --model "$m" --ranks 1 --microbatches "$MB" \
        --seq "$SEQ" --steps "$STEPS" --quiet --json | field median_step_seconds)
  best="" best_s=1e300
  for k in 0 1 2; do
    split=(--first-stage-layers $((L / 2 + k)) --last-stage-layers $((L / 2 - k)))
    : >"$tmp/runs"
    for _ in $(seq "$REPEATS"); do
      env -u OPENBLAS_NUM_THREADS "$pprun" --model "$m" --ranks 2 --microbatches "$MB" \
        --seq "$SEQ" --steps "$STEPS" --quiet "${split[@]}" --trace "$tmp/t.json"
      python3 "$root/bench/pipeline_bound.py" "$tmp/t.json" >>"$tmp/runs"
    done
    # the fastest run's step, with that run's own bound
    read -r ms bs rs < <(python3 -c "
import json
rows = [json.loads(l) for l in open('$tmp/runs')]
b = min(rows, key=lambda r: r['fastest_measured_s'])
print(b['fastest_measured_s'], b['its_bound_s'], b['ratio'])")
    printf '%-9s %-7s %12.4f %12.4f %11.3fx %10.2fx\n' "$m" "$((L / 2 + k))/$((L / 2 - k))" \
           "$ms" "$bs" "$rs" "$(python3 -c "print($one / $ms)")"
    if python3 -c "import sys; sys.exit(0 if $ms < $best_s else 1)"; then
      best_s=$ms best=$((L / 2 + k))/$((L / 2 - k))
    fi
  done
  echo "$m: fastest two-rank split $best ($best_s s; one rank $one s)"
done

want 3 && blocks
true
