/* export_torchtitan.c — the chosen configuration as torchtitan's command-line overrides.
 *
 * Names: torchtitan/config/configs.py (github.com/pytorch/torchtitan, 2026), checked against the
 * options its CLI accepts (tests/fixtures/torchtitan/cli_options.txt). The schedule goes in as
 * PyTorch pipelining's runtime CSV (the compute_comms form that
 * _PipelineScheduleRuntime._load_csv reads), which `pptune schedule --format csv` writes; the
 * output starts with that command. Said in the output, not approximated: torchtitan builds the
 * model from its own registry (--module/--config), so the shape is not a flag; activation
 * checkpointing is its config's (ac_comment). Sharding: none is replicated data parallelism
 * (data_parallel_replicate_degree); optimizer and gradients are FSDP without resharding after
 * forward (ZeRO-2's form; torchtitan has no ZeRO-1). Context parallelism:
 * context_parallel_degree. Bidirectional schedules
 * (two pipelines) have no form in PyTorch's CSV: its row in export.c refuses them with the reason.
 * By name: where PyTorch has the schedule (the registry's torch_name, get_schedule_class's
 * names: "1F1B", "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV", ...) the output names
 * it too. A schedule whose stages sit V-shaped on the ranks (rank r holds stages r and
 * 2p - 1 - r: zbv, dualpipev) goes by name only: torchtitan places stages that way only for
 * its V schedule classes (PipelineFactory / pipeline_module_split, style "v"), and looped
 * (rank r holds r, r + p, ...) for the CSV runtime, which would put the wrong layers on the
 * ranks. PyTorch's generator orders the actions its own way, which the output says. */
#include <stdlib.h>
#include <string.h>

#include "export_impl.h"

#define CSV_FILE "pptune-schedule.csv"

/* Activation checkpointing: at the commit of cli_options.txt torchtitan sets it in the job's
 * Python config (an activation-checkpoint policy), not on the command line, so it is said as a
 * comment: none, full (every block, as pptune's full), selective (torchtitan's is op-level:
 * it keeps the matmul outputs, not Megatron's attention-core recomputation that pptune
 * models). Full on the first k layers only has no torchtitan form: refused (ac_check). */
static void ac_comment(const pp_config *c, FILE *fp)
{
    fprintf(fp, "# activation checkpointing: %s (in the job's config; torchtitan's CLI has no "
                "option for it)\n",
            c->recompute == PP_RECOMPUTE_FULL ? "full, every transformer block"
            : c->recompute == PP_RECOMPUTE_SELECTIVE
                ? "selective: torchtitan's op-level selective AC, which keeps more than the "
                  "attention-core recomputation the profile's memory figures assume"
                : "none");
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
    fprintf(fp, " --format csv > " CSV_FILE "\n");
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

/* The schedule's overrides: the CSV runtime, or PyTorch's class by name (see the file comment). */
static void schedule_flags(const pp_sched_desc *d, int looped, FILE *fp)
{
    if (looped)
        fprintf(fp, " --parallelism.pipeline_parallel_schedule _PipelineScheduleRuntime "
                    "--parallelism.pipeline_parallel_schedule_csv " CSV_FILE);
    else
        fprintf(fp, " --parallelism.pipeline_parallel_schedule %s", d->torch_name);
}

pp_status pp_export_torchtitan(const pp_profile *p, FILE *fp)
{
    const pp_config *c = &p->chosen.config;
    const pp_sched_desc *d = pp_export_desc(c);
    /* a bidirectional schedule (two pipelines) never reaches here: its row in export.c */
    int looped;
    PP_TRY(ac_check(p));
    PP_TRY(placement_looped(p, &looped));
    if (!looped && !d->torch_name)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: %s places its stages V-shaped over the ranks, which torchtitan builds "
                      "only for the schedules PyTorch names (ZBVZeroBubble, DualPipeV), and "
                      "PyTorch has no %s",
                      p->name, d->title, d->title);
    int S = c->p * c->v; /* one pipe: every stage of it, v per rank */
    fprintf(fp, "# torchtitan overrides from pptune profile %s (model %s, %s schedule)\n", p->name,
            p->model.name, c->schedule);
    fprintf(fp, "# model: torchtitan builds it from --module/--config (its registry), not from "
                "flags: pick the config of L=%d h=%d heads=%d/%d ffn=%d V=%d\n",
                p->model.layers, p->model.hidden, p->model.heads, p->model.kv_heads, p->model.ffn,
                p->model.vocab);
    data_parallel(c, 1, fp);
    ac_comment(c, fp);
    if (looped) {
        schedule_command(p, fp);
        if (d->torch_name)
            fprintf(fp, "# or by name: --parallelism.pipeline_parallel_schedule %s in place of "
                        "the CSV (PyTorch's own generator of %s, which orders the actions its "
                        "own way, not as the CSV pptune simulated)\n",
                    d->torch_name, d->title);
    } else {
        fprintf(fp, "# schedule by name: torchtitan places %s's V-shaped stages (rank r holds "
                    "stages r and %d - r) only for PyTorch's %s, not for a CSV; PyTorch's "
                    "generator orders the actions its own way, so the step differs from the "
                    "one pptune simulated (`pptune schedule --kind %s` shows pptune's)\n",
                d->title, 2 * c->p - 1, d->torch_name, c->schedule);
    }
    fprintf(fp, "--parallelism.pipeline_parallel_degree %d --parallelism.tensor_parallel_degree %d",
            c->p, c->t);
    if (c->t > 1)
        fprintf(fp, " --parallelism.%senable_sequence_parallel",
                c->sequence_parallel ? "" : "no_");
    data_parallel(c, 0, fp);
    if (c->cp > 1)
        fprintf(fp, " --parallelism.context_parallel_degree %d", c->cp);
    schedule_flags(d, looped, fp);
    if (!pp_export_split_even(c)) {
        /* torchtitan gives every stage n = (L + first_less + last_less) / S layers and the
         * first / last stage `less` fewer: with the middle stages' n, first_less = n - A and
         * last_less = n - Z reproduce pptune's A / Z (two stages: n = max(A, Z)) */
        /* the schedules' split keeps the middle stages equal, so only the edges can break
         * torchtitan's form: a stage with more layers than the middle ones */
        int layers[PP_EXPORT_MAX_STAGES], stages;
        PP_TRY(pp_export_stage_layers(p, layers, &stages));
        int A = layers[0], Z = layers[stages - 1];
        int n = stages > 2 ? layers[1] : (A > Z ? A : Z);
        if (A > n || Z > n)
            return PP_ERR(PP_ERR_UNSUPPORTED,
                          "%s: torchtitan's first/last_stage_less_layers take layers off the edge "
                          "stages of an even split; this profile's split gives the first stage "
                          "%d, the last %d and the middle stages %d layers",
                          p->name, A, Z, n);
        fprintf(fp, " --parallelism.pipeline_parallel_first_stage_less_layers %d "
                    "--parallelism.pipeline_parallel_last_stage_less_layers %d",
                n - A, n - Z);
    } else {
        fprintf(fp, " --parallelism.pipeline_parallel_first_stage_less_layers 0 "
                    "--parallelism.pipeline_parallel_last_stage_less_layers 0");
        if (p->model.layers % S == 0)
            fprintf(fp, " --parallelism.pipeline_parallel_layers_per_stage %d",
                    p->model.layers / S);
    }
    fprintf(fp, " --parallelism.num_pp_microbatches %d", c->N);
    fprintf(fp, " --training.num_tokens_per_microbatch_per_dp_rank %ld "
                "--training.num_tokens_per_train_step %ld --training.max_context_length %d",
            (long)c->b * p->model.seq, (long)p->global_batch * p->model.seq, p->model.seq);
    fprintf(fp, " --training.mixed_precision_param %s\n",
            p->options.bf16 ? "bfloat16" : "float32");
    return PP_OK;
}
