/* profile_export.c — the chosen configuration as the launch options of a training framework.
 *
 * Megatron-LM: flag names as in megatron/training/arguments.py (2025):
 * --tensor-model-parallel-size, --pipeline-model-parallel-size,
 * --num-layers-per-virtual-pipeline-stage, --microbatch-group-size-per-virtual-pipeline-stage
 * (dest microbatch_group_size_per_vp_stage), --micro-batch-size, --global-batch-size,
 * --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split (the Llama 3
 * split: embedding and loss each count as a layer, so the first and last stage hold one layer
 * fewer), --sequence-parallel, --use-distributed-optimizer, --recompute-*; and
 * --enable-bitpipe-schedule of the BitPipe fork (github.com/wuhouming/BitPipe, Megatron 23.08).
 * NeMo: the keys of megatron_gpt_config.yaml (NeMo 1.x). pprun: runtime/pprun's options.
 *
 * What a target cannot express is refused with the reason rather than approximated, with one
 * deliberate exception: a GPipe profile exports to Megatron's 1F1B schedule, which has the same
 * step time (same bubble, Narayanan et al. 2021) and holds fewer activations, so it fits
 * wherever the GPipe configuration fitted.
 */
#include <string.h>

#include "pp_profile.h"
#include "pp_sched.h"

pp_status pp_profile_export_format_parse(const char *s, pp_profile_export_format *out)
{
    if (s && !strcmp(s, "megatron"))
        *out = PP_PROFILE_EXPORT_MEGATRON;
    else if (s && !strcmp(s, "nemo"))
        *out = PP_PROFILE_EXPORT_NEMO;
    else if (s && !strcmp(s, "pprun"))
        *out = PP_PROFILE_EXPORT_PPRUN;
    else
        return PP_ERR(PP_ERR_INVALID, "export format \"%s\": expected megatron, nemo or pprun",
                      s ? s : "");
    return PP_OK;
}

/* The schedule's registry row (the reader accepted only registry names). */
static const pp_sched_desc *desc(const pp_profile_config *c)
{
    return pp_sched_lookup(c->schedule);
}

/* Tunable chunks (interleaved) with more than one per rank: Megatron's virtual pipeline. */
static int virtual_pipeline(const pp_profile_config *c)
{
    return desc(c)->chunks == 0 && c->v > 1;
}

static void megatron_recompute(const pp_profile *p, FILE *fp)
{
    if (!strcmp(p->options.recompute, "selective"))
        fprintf(fp, " --recompute-granularity selective");
    else if (!strcmp(p->options.recompute, "full"))
        /* pptune's full recomputation model keeps one layer's input per layer (Korthikanti
         * 2022): Megatron's uniform method with one layer per checkpoint. */
        fprintf(fp, " --recompute-granularity full --recompute-method uniform "
                    "--recompute-num-layers 1");
}

static pp_status export_megatron(const pp_profile *p, FILE *fp)
{
    const pp_profile_config *c = &p->chosen.config;
    const pp_sched_desc *d = desc(c);
    char names[128];
    if (d->megatron == PP_SCHED_MEGATRON_NONE)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: Megatron-LM has no %s schedule; re-run the search with "
                      "--schedules %s",
                      p->name, d->title,
                      pp_sched_names(PP_SCHED_MEGATRON_FORK, ",", names, sizeof names));
    int L = p->model.layers;
    int ends = c->first_layers || c->last_layers;
    if (ends && virtual_pipeline(c)) /* Megatron's counts are per pipeline rank, not chunk */
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: Megatron-LM's --decoder-first/last-pipeline-num-layers give a "
                      "pipeline rank's layers, split evenly over its virtual stages; this "
                      "profile's first/last-stage split (%d/%d) sets one virtual stage",
                      p->name, c->first_layers, c->last_layers);
    fprintf(fp, "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d", c->t, c->p);
    if (c->first_layers) /* the rest even, as pptune's first-last split (pp_sched_split) */
        fprintf(fp, " --decoder-first-pipeline-num-layers %d", c->first_layers);
    if (c->last_layers)
        fprintf(fp, " --decoder-last-pipeline-num-layers %d", c->last_layers);
    if (virtual_pipeline(c)) {
        if (!c->uneven && L % (c->p * c->v) == 0)
            fprintf(fp, " --num-layers-per-virtual-pipeline-stage %d", L / (c->p * c->v));
        else /* uneven: Megatron places the layers itself once told the chunk count */
            fprintf(fp, " --num-virtual-stages-per-pipeline-rank %d", c->v);
        fprintf(fp, " --microbatch-group-size-per-virtual-pipeline-stage %d", c->G);
    }
    if (c->uneven)
        fprintf(fp, " --account-for-embedding-in-pipeline-split "
                    "--account-for-loss-in-pipeline-split");
    fprintf(fp, " --micro-batch-size %d --global-batch-size %d", c->b, p->global_batch);
    fprintf(fp,
            " --num-layers %d --hidden-size %d --num-attention-heads %d --seq-length %d "
            "--max-position-embeddings %d",
            L, p->model.hidden, p->model.heads, p->model.seq, p->model.seq);
    if (p->options.sequence_parallel && c->t > 1)
        fprintf(fp, " --sequence-parallel");
    if (p->options.distributed_optimizer)
        fprintf(fp, " --use-distributed-optimizer");
    megatron_recompute(p, fp);
    if (d->megatron == PP_SCHED_MEGATRON_FORK)
        fprintf(fp, " %s", d->megatron_flag);
    fprintf(fp, "\n");
    return PP_OK;
}

static pp_status export_nemo(const pp_profile *p, FILE *fp)
{
    const pp_profile_config *c = &p->chosen.config;
    const pp_sched_desc *d = desc(c);
    char names[128];
    if (d->megatron == PP_SCHED_MEGATRON_FORK)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: NeMo has no %s schedule; use --format megatron (%s fork) or "
                      "re-run the search with --schedules %s",
                      p->name, c->schedule, d->title,
                      pp_sched_names(PP_SCHED_MEGATRON_UPSTREAM, ",", names, sizeof names));
    if (d->megatron == PP_SCHED_MEGATRON_NONE)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: NeMo has no %s schedule; re-run the search with --schedules %s",
                      p->name, c->schedule,
                      pp_sched_names(PP_SCHED_MEGATRON_UPSTREAM, ",", names, sizeof names));
    int gpus = c->p * c->t * c->d, per_node = p->cluster.gpus_per_node;
    int devices = gpus < per_node ? gpus : per_node;
    fprintf(fp, "# NeMo megatron_gpt_config.yaml overrides from pptune profile %s\n", p->name);
    fprintf(fp, "# cluster %s x%d (%s), model %s, %s schedule\n", p->cluster.name, p->cluster.nodes,
            p->cluster.fingerprint, p->model.name, c->schedule);
    fprintf(fp, "trainer:\n  devices: %d\n  num_nodes: %d\n", devices,
            (gpus + devices - 1) / devices);
    fprintf(fp, "model:\n  micro_batch_size: %d\n  global_batch_size: %d\n", c->b, p->global_batch);
    fprintf(fp, "  encoder_seq_length: %d\n", p->model.seq);
    fprintf(fp, "  tensor_model_parallel_size: %d\n  pipeline_model_parallel_size: %d\n", c->t,
            c->p);
    if (virtual_pipeline(c))
        fprintf(fp, "  virtual_pipeline_model_parallel_size: %d\n", c->v);
    else
        fprintf(fp, "  virtual_pipeline_model_parallel_size: null\n");
    if (virtual_pipeline(c) && c->G != c->p)
        fprintf(fp,
                "  # micro-batch group %d: megatron_gpt_config has no key for it (Megatron-Core "
                "ModelParallelConfig.microbatch_group_size_per_vp_stage); without it NeMo "
                "uses %d\n",
                c->G, c->p);
    fprintf(fp, "  sequence_parallel: %s\n",
            p->options.sequence_parallel && c->t > 1 ? "true" : "false");
    if (!strcmp(p->options.recompute, "none"))
        fprintf(fp, "  activations_checkpoint_granularity: null\n");
    else if (!strcmp(p->options.recompute, "selective"))
        fprintf(fp, "  activations_checkpoint_granularity: selective\n");
    else
        fprintf(fp, "  activations_checkpoint_granularity: full\n"
                    "  activations_checkpoint_method: uniform\n"
                    "  activations_checkpoint_num_layers: 1\n");
    if (c->uneven)
        fprintf(fp, "  # uneven split: first and last stage one layer fewer (Megatron "
                    "--account-for-embedding/loss-in-pipeline-split); megatron_gpt_config has no "
                    "key for it\n");
    if (p->options.distributed_optimizer)
        fprintf(fp, "  optim:\n    name: distributed_fused_adam\n");
    return PP_OK;
}

static pp_status export_pprun(const pp_profile *p, FILE *fp)
{
    const pp_profile_config *c = &p->chosen.config;
    if (c->t > 1)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: the chosen configuration uses tensor parallelism (t = %d), which pprun "
                      "does not implement; re-run the search with --no-tp",
                      p->name, c->t);
    pp_profile_pprun_line line = {.model = p->model.name, .config = c, .seq = p->model.seq};
    char args[512];
    fprintf(fp, "%s\n", pp_profile_pprun_args(&line, args, sizeof args));
    return PP_OK;
}

pp_status pp_profile_export(const pp_profile *p, pp_profile_export_format fmt, FILE *fp)
{
    if (!p->has_chosen)
        return PP_ERR(PP_ERR_INVALID,
                      "%s has no chosen configuration (nothing fitted the "
                      "memory): nothing to export",
                      p->name);
    switch (fmt) {
    case PP_PROFILE_EXPORT_MEGATRON:
        PP_TRY(export_megatron(p, fp));
        break;
    case PP_PROFILE_EXPORT_NEMO:
        PP_TRY(export_nemo(p, fp));
        break;
    case PP_PROFILE_EXPORT_PPRUN:
        PP_TRY(export_pprun(p, fp));
        break;
    default:
        return PP_ERR(PP_ERR_INVALID, "unknown export format %d", (int)fmt);
    }
    return PP_OK;
}
