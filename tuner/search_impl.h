/* search_impl.h — private to the tuner library: the step of pp_tune_search that follows the
 * passes over the space (search_trials.c). */
#ifndef PP_SEARCH_IMPL_H
#define PP_SEARCH_IMPL_H

#include "pp_tune.h"

/* Trials of r's best through sp->runner where sp allows them (pp_tune_search_params.trials),
 * then the recalibration (r->calibration) and the choice (r->best reordered: the fastest
 * measured candidate that fits first). A trial that fails is a result; errors are allocation
 * failures only. */
pp_status pp_tune_search_trials(const pp_tune_search_params *sp, pp_tune_result *r);

#endif
