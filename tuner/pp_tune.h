/* pp_tune.h — the tuner: model descriptions, the per-rank memory model, the time model that
 * turns one configuration into simulator costs, the search over configurations, trials on the
 * bundled runtime, and the profile the search writes.
 *
 * Units everywhere: bytes, seconds, FLOP (not FLOP/s) for work and FLOP/s for rates.
 * Vocabulary (profiles/pp_config.h, the one configuration type; Narayanan et al., SC'21,
 * arXiv:2104.04473): p = D pipeline ranks, v chunks per rank, G interleaving group, b
 * micro-batch size (sequences), d data-parallel size, t tensor-parallel size, N micro-batches
 * per pipeline per step = global_batch / (b * d).
 *
 * Ownership: *_create / pp_tune_search return objects freed by the matching *_destroy
 * (NULL is a no-op). Functions return pp_status and leave a message (pp_common.h).
 */
#ifndef PP_TUNE_H
#define PP_TUNE_H

/* The umbrella: each part has its own header, which stands alone. Include the one you use;
 * callers of pp_tune.h keep compiling. */
#include "pp_tune_alloc.h"    /* the allocation trials run in (alloc.c) */
#include "pp_tune_hw.h"       /* the hardware summary (hw.c) */
#include "pp_tune_memory.h"   /* the per-rank memory model (memory.c, runtime_mem.c) */
#include "pp_tune_model.h"    /* models: presets, HuggingFace import, sizes (models.c) */
#include "pp_tune_opts.h"     /* options of the memory and time models */
#include "pp_tune_predict.h"  /* one configuration's prediction, steady state, breakdown */
#include "pp_tune_probe.h"    /* probes over the allocation (alloc_probe.c) */
#include "pp_tune_profile.h"  /* the profile the search writes (profile_write.c) */
#include "pp_tune_search.h"   /* the search (search.c, search_trials.c) */
#include "pp_tune_time.h"     /* the time model (timemodel.c) */
#include "pp_tune_trial.h"    /* trials with pprun (trials.c) */
#include "pp_tune_validate.h" /* the time model against published runs (validate.c) */

#endif
