/* export_torchtitan.c — the chosen configuration as torchtitan's command-line overrides.
 *
 * Names: torchtitan/config/configs.py (github.com/pytorch/torchtitan, 2026), checked against the
 * options its CLI accepts (tests/fixtures/torchtitan/cli_options.txt). The schedule goes in as
 * PyTorch pipelining's runtime CSV in the compute_only form, the one torchtitan loads
 * (pipeline_parallel.py's _build_pipeline_schedule calls _PipelineScheduleRuntime._load_csv
 * with its default format), which `pptune schedule --format csv-compute` writes; the output
 * starts with that command. With a CSV torchtitan still asks get_schedule_class for the name in
 * --parallelism.pipeline_parallel_schedule, to count the stages of a rank (one for a
 * single-stage class) and place them (looped unless a V class): so the name given is
 * PyTorch's 1F1B (one stage per rank) or Interleaved1F1B (several, looped), never
 * _PipelineScheduleRuntime, which get_schedule_class does not know. The layers of each stage
 * are said with --parallelism.pipeline_parallel_layers_per_stage and first/last_stage_less_layers,
 * checked here against torchtitan's own split (_generate_llm_fqn_per_model_part); what they
 * cannot say is refused. Also: --training.disable_cuda_graphs with more than one stage
 * (torchtitan's Trainer.Config refuses CUDA graphs with pipeline parallelism), and the
 * activation checkpointing the profile planned (torchtitan's default is its selective AC, and
 * its larger Llama configs pick full AC), as tyro's subcommand activation-checkpoint:MODE, last.
 * Said in the output, not approximated: torchtitan builds the model from its own registry
 * (--module/--config), so the shape is not a flag. Sharding: none is replicated data
 * parallelism (data_parallel_replicate_degree); optimizer and gradients are FSDP without
 * resharding after forward (ZeRO-2's form; torchtitan has no ZeRO-1). Context parallelism:
 * context_parallel_degree. Bidirectional schedules (two pipelines) have no form
 * in PyTorch's CSV: its row in export.c refuses them with the reason.
 * By name: where PyTorch has the schedule (the registry's torch_name, get_schedule_class's
 * names: "1F1B", "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV", ...) the output names
 * it too. A schedule whose stages sit V-shaped on the ranks (rank r holds stages r and
 * 2p - 1 - r: zbv, dualpipev) goes by name only: torchtitan places stages that way only for
 * its V schedule classes (_get_pp_rank_to_stage_indices_mapping, style "v"), and looped
 * (rank r holds r, r + p, ...) for every other name, which would put the wrong layers on the
 * ranks. PyTorch's generator orders the actions its own way, which the output says. */
#include <stdlib.h>
#include <string.h>

#include "export_impl.h"

#define CSV_FILE "pptune-schedule.csv"

static const char *titan_ac(const pp_config *c)
{
    return c->recompute == PP_RECOMPUTE_FULL        ? "full"
           : c->recompute == PP_RECOMPUTE_SELECTIVE ? "selective"
                                                    : "none";
}

/* Activation checkpointing as the profile planned it: the command line ends with tyro's
 * subcommand activation-checkpoint:MODE (titan_ac); this comment says what the mode keeps:
 * none, full (every block, as pptune's full), selective (torchtitan's is op-level: it keeps the
 * matmul outputs, not Megatron's attention-core recomputation that pptune models). Full on
 * the first k layers only has no torchtitan form: refused (ac_check). */
static void ac_comment(const pp_config *c, FILE *fp)
{
    fprintf(fp, "# activation checkpointing: %s (activation-checkpoint:%s, last on the line)\n",
            c->recompute == PP_RECOMPUTE_FULL ? "full, every transformer block"
            : c->recompute == PP_RECOMPUTE_SELECTIVE
                ? "selective: torchtitan's op-level selective AC, which keeps more than the "
                  "attention-core recomputation the profile's memory figures assume"
                : "none",
            titan_ac(c));
}

/* Data parallelism: shard none replicated (DDP), optimizer or gradients FSDP without
 * resharding after forward; as the comment line that says what it is (comment = 1) or as the
 * flags. */
static void data_parallel(const pp_config *c, int comment, FILE *fp)
{
    int fsdp = c->shard != PP_SHARD_NONE;
    if (comment && !fsdp)
        fprintf(fp, "# data parallelism: replicated (data_parallel_replicate_degree %d, DDP), "
                    "as the profile's memory figures assume\n",
                c->d);
    else if (comment)
        fprintf(fp, "# data parallelism: FSDP over %d ranks without resharding the parameters "
                    "after forward (fsdp_reshard_after_forward never): gradients and optimizer "
                    "state sharded, %s\n",
                c->d,
                c->shard == PP_SHARD_GRADIENTS
                    ? "as the profile's ZeRO-2 assumes (FSDP also keeps the parameters sharded "
                      "between steps, which only saves memory)"
                    : "more than the profile's ZeRO-1 (torchtitan has no optimizer-only "
                      "sharding): memory at most the profile's, communication per "
                      "micro-batch");
    else
        fprintf(fp, " --parallelism.data_parallel_shard_degree %d "
                    "--parallelism.data_parallel_replicate_degree %d%s",
                fsdp ? c->d : 1, fsdp ? 1 : c->d,
                fsdp ? " --parallelism.fsdp_reshard_after_forward never" : "");
}

/* Expert parallelism: torchtitan's expert_parallel_degree borrows its ranks from the FSDP,
 * context and tensor ranks (configs.py: efsdp = dp_shard x cp x tp / ep), so the experts
 * take no tensor parallelism of their own and a replicated (DDP) data-parallel group lends
 * none; pptune plans the experts split by t over ep ranks of d x cp (Megatron-Core's way).
 * What the two agree on is exported; the rest is refused with the reason. */
static pp_status titan_experts(const pp_profile *p)
{
    const pp_config *c = &p->chosen.config;
    if (c->ep <= 1)
        return PP_OK;
    if (c->shard == PP_SHARD_NONE)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: ep = %d with replicated data parallelism: torchtitan carves its "
                      "expert-parallel ranks out of FSDP's (data_parallel_shard_degree), context "
                      "and tensor ranks, and a replicated group lends none; search with --shard "
                      "gradients for torchtitan, or export to Megatron-LM or NeMo 2",
                      p->name, c->ep);
    if (c->t > 1)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: ep = %d with t = %d: torchtitan's expert parallelism borrows the "
                      "tensor ranks (efsdp = dp_shard x cp x tp / ep), so its experts are not "
                      "split by t as pptune planned them (Megatron-Core's expert tensor "
                      "parallelism = t); export to Megatron-LM or NeMo 2, or search with --no-tp",
                      p->name, c->ep, c->t);
    return PP_OK;
}

static pp_status ac_check(const pp_profile *p)
{
    const pp_config *c = &p->chosen.config;
    if (c->recompute == PP_RECOMPUTE_FULL && c->recompute_layers > 0)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: the configuration recomputes the first %d layers of each stage "
                      "(Megatron's --recompute-method block); torchtitan's activation "
                      "checkpointing is per block for every block (full) or op-level "
                      "(selective), with no first-k form: export --format megatron, or search "
                      "with --recompute-layers 0",
                      p->name, c->recompute_layers);
    return PP_OK;
}

static void schedule_command(const pp_profile *p, FILE *fp)
{
    const pp_config *c = &p->chosen.config;
    const pp_sched_desc *d = pp_export_desc(c);
    fprintf(fp, "# schedule CSV first: pptune schedule --kind %s --ranks %d", c->schedule, c->p);
    if (d->chunks == 0)
        fprintf(fp, " --chunks %d --group %d", c->v, c->G);
    fprintf(fp, " --microbatches %d --layers %d", c->N, p->model.layers);
    if (c->uneven)
        fprintf(fp, " --uneven");
    if (c->first_layers)
        fprintf(fp, " --first-stage-layers %d", c->first_layers);
    if (c->last_layers)
        fprintf(fp, " --last-stage-layers %d", c->last_layers);
    fprintf(fp, " --format csv-compute > " CSV_FILE "\n");
}

/* *looped = 1 when the schedule puts stage k on rank k mod p (what torchtitan's CSV runtime
 * builds), 0 when it places them otherwise (V-shaped). From the generated schedule, not from
 * its name. */
static pp_status placement_looped(const pp_profile *p, int *looped)
{
    const pp_config *c = &p->chosen.config;
    *looped = 1;
    if (c->v <= 1)
        return PP_OK;
    pp_sched_params sp;
    pp_config_sched_params(c, p->model.layers, &sp);
    pp_sched *s = NULL;
    PP_TRY(pp_sched_generate(c->schedule, &sp, &s));
    for (int k = 0; k < s->stages_per_pipe; k++)
        if (pp_sched_rank_of(s, 0, k) != k % s->ranks)
            *looped = 0;
    pp_sched_destroy(s);
    return PP_OK;
}

/* The schedule's overrides: the CSV, with the PyTorch class whose stage count and placement
 * torchtitan takes for it (see the file comment), or PyTorch's class by name. */
static void schedule_flags(const pp_config *c, const pp_sched_desc *d, int looped, FILE *fp)
{
    if (looped)
        fprintf(fp, " --parallelism.pipeline_parallel_schedule %s "
                    "--parallelism.pipeline_parallel_schedule_csv " CSV_FILE,
                c->v > 1 ? "Interleaved1F1B" : "1F1B");
    else
        fprintf(fp, " --parallelism.pipeline_parallel_schedule %s", d->torch_name);
}

/* 1 when torchtitan's split (pipeline_parallel.py, _generate_llm_fqn_per_model_part) of L
 * layers over S stages, with the embedding counted as `in` layers and the head as `out`, gives
 * each stage layers[k]: E = L + in + out effective layers, E / S each, the first E % S stages
 * one more, the first stage's `in` and the last's `out` of them not transformer layers. */
static int titan_split_is(const int *layers, int S, int L, int in, int out)
{
    int E = L + in + out, base = E / S, extra = E % S;
    if (S < 2 || base < 1 || in > base || out > base)
        return 0;
    for (int k = 0; k < S; k++) {
        int eff = base + (k < extra);
        int got = k == 0 ? eff - in : k == S - 1 ? eff - out : eff;
        if (got != layers[k])
            return 0;
    }
    return 1;
}

/* torchtitan's first/last_stage_less_layers and layers_per_stage that give pptune's split
 * (each stage's layers[k]) over S stages: it makes ceil((L + less_first + less_last) /
 * layers_per_stage) stages and splits them as titan_split_is. PP_ERR_UNSUPPORTED when none
 * does. */
static pp_status titan_split(const pp_profile *p, int *less_first, int *less_last, int *per_stage)
{
    int layers[PP_EXPORT_MAX_STAGES], S, L = p->model.layers;
    PP_TRY(pp_export_stage_layers(p, layers, &S));
    *less_first = *less_last = 0;
    *per_stage = L;
    if (S == 1)
        return PP_OK;
    int most = 0;
    for (int k = 0; k < S; k++)
        most = layers[k] > most ? layers[k] : most;
    /* the middle stages hold n or n + 1; the edges take n - less */
    for (int n = most; n >= 1 && n >= most - 1; n--) {
        int in = n - layers[0], out = n - layers[S - 1];
        if (in < 0 || out < 0 || !titan_split_is(layers, S, L, in, out))
            continue;
        int E = L + in + out;
        for (int lps = E / S; lps <= (E + S - 1) / S; lps++)
            if (lps >= 1 && (E + lps - 1) / lps == S) {
                *less_first = in, *less_last = out, *per_stage = lps;
                return PP_OK;
            }
    }
    return PP_ERR(PP_ERR_UNSUPPORTED,
                  "%s: torchtitan splits its layers evenly over the stages (the first ones one "
                  "more) and takes first/last_stage_less_layers off the edge stages; this "
                  "profile's split over %d stages gives the first stage %d, the last %d and the "
                  "middle stages %d layers, which that cannot give",
                  p->name, S, layers[0], layers[S - 1], S > 2 ? layers[1] : 0);
}

/* torchtitan's activation checkpointing, a tyro subcommand of Trainer.Config
 * (ActivationCheckpointingConfig: none, selective, full, memory-budget). */
pp_status pp_export_torchtitan(const pp_profile *p, FILE *fp)
{
    const pp_config *c = &p->chosen.config;
    const pp_sched_desc *d = pp_export_desc(c);
    /* a bidirectional schedule (two pipelines) never reaches here: its row in export.c */
    int looped;
    PP_TRY(ac_check(p));
    PP_TRY(titan_experts(p));
    PP_TRY(placement_looped(p, &looped));
    if (!looped && !d->torch_name)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: %s places its stages V-shaped over the ranks, which torchtitan builds "
                      "only for the schedules PyTorch names (ZBVZeroBubble, DualPipeV), and "
                      "PyTorch has no %s",
                      p->name, d->title, d->title);
    long long S = pp_config_stages(c); /* one pipe: every stage of it, v per rank */
    int less_first, less_last, per_stage;
    PP_TRY(titan_split(p, &less_first, &less_last, &per_stage));
    fprintf(fp, "# torchtitan overrides from pptune profile ");
    pp_export_provenance(p, fp);
    fprintf(fp, "# model: torchtitan builds it from --module/--config (its registry), not from "
                "flags: pick the config of L=%d h=%d heads=%d/%d ffn=%d V=%d\n",
                p->model.layers, p->model.hidden, p->model.heads, p->model.kv_heads, p->model.ffn,
                p->model.vocab);
    if (p->model.moe.experts > 0)
        fprintf(fp, "# experts: %d routed, top-%d, expert ffn %d, shared ffn %d (a MoE model of "
                    "torchtitan's registry, e.g. its qwen3 or deepseek_v3 module)\n",
                p->model.moe.experts, p->model.moe.top_k, p->model.moe.ffn,
                p->model.moe.shared_ffn);
    data_parallel(c, 1, fp);
    ac_comment(c, fp);
    if (looped) {
        schedule_command(p, fp);
        /* PyTorch's split-backward classes are multi-stage: with one stage per rank, only
         * the CSV says ZB-H1 (torchtitan would refuse the name with these layers per stage) */
        if (d->torch_name && (c->v > 1 || !d->split_backward))
            fprintf(fp, "# or by name: --parallelism.pipeline_parallel_schedule %s without "
                        "the _csv override (PyTorch's own generator of %s, which orders the "
                        "actions its own way, not as the CSV pptune simulated)\n",
                    d->torch_name, d->title);
    } else {
        fprintf(fp, "# schedule by name: torchtitan places %s's V-shaped stages (rank r holds "
                    "stages r and %lld - r) only for PyTorch's %s, not for a CSV; PyTorch's "
                    "generator orders the actions its own way, so the step differs from the "
                    "one pptune simulated (`pptune schedule --kind %s` shows pptune's)\n",
                d->title, 2LL * c->p - 1, d->torch_name, c->schedule);
    }
    fprintf(fp, "--parallelism.pipeline_parallel_degree %d --parallelism.tensor_parallel_degree %d",
            c->p, c->t);
    if (c->t > 1)
        fprintf(fp, " --parallelism.%senable_sequence_parallel",
                c->sequence_parallel ? "" : "no_");
    data_parallel(c, 0, fp);
    if (c->ep > 1)
        fprintf(fp, " --parallelism.expert_parallel_degree %d", c->ep);
    if (c->cp > 1)
        fprintf(fp, " --parallelism.context_parallel_degree %d", c->cp);
    schedule_flags(c, d, looped, fp);
    if (S > 1)
        fprintf(fp, " --parallelism.pipeline_parallel_first_stage_less_layers %d "
                    "--parallelism.pipeline_parallel_last_stage_less_layers %d "
                    "--parallelism.pipeline_parallel_layers_per_stage %d",
                less_first, less_last, per_stage);
    fprintf(fp, " --parallelism.num_pp_microbatches %d", c->N);
    fprintf(fp, " --training.num_tokens_per_microbatch_per_dp_rank %ld "
                "--training.num_tokens_per_train_step %ld --training.max_context_length %d",
            (long)c->b * p->model.seq, (long)p->global_batch * p->model.seq, p->model.seq);
    fprintf(fp, " --training.mixed_precision_param %s", p->options.bf16 ? "bfloat16" : "float32");
    if (c->p > 1) /* Trainer.Config: "CUDA graphs do not support pipeline parallelism yet" */
        fprintf(fp, " --training.disable_cuda_graphs");
    fprintf(fp, " activation-checkpoint:%s\n", titan_ac(c));
    return PP_OK;
}
