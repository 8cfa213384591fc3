/* tune_trials_cli.c — the program side of trials: prints what pp_tune_search reports about
 * them (search_trials.c runs them, recalibrates and chooses): a progress bar on stderr, and one
 * line for every candidate not trialled, not started or failed. Decides nothing. */
#include <stdio.h>
#include <string.h>

#include "tune_cli.h"

static void bar(int done, int total, const char *what)
{
    int width = 30, fill = total ? width * done / total : width;
    fprintf(stderr, "\rtrials    [%.*s%*s] %d/%d %-40s", fill, "##############################",
            width - fill, "", done, total, what);
    if (done == total)
        fprintf(stderr, "\n");
    fflush(stderr);
}

void pp_cli_trial_event(void *ctx, const pp_tune_trial_event *ev)
{
    const pp_cli_search_view *view = ctx;
    int progress = view->progress;
    char cb[160] = "", need[16], cap[16];
    if (ev->cfg)
        pp_config_str(ev->cfg, cb, sizeof cb);
    switch (ev->kind) {
    case PP_TUNE_TRIAL_NO_RUNNER:
        fprintf(stderr, "pptune search: cannot find pprun for trials (set PPTUNE_PPRUN); "
                        "figures stay predicted\n");
        break;
    case PP_TUNE_TRIAL_SKIPPED:
        fprintf(stderr,
                "%spptune search: not trialled: %s: the bundled runtime needs %s per GPU "
                "(fp32 activations, no recompute), %s usable\n",
                progress ? "\n" : "", cb, pp_fmt_bytes(ev->need, need, sizeof need),
                pp_fmt_bytes(ev->capacity, cap, sizeof cap));
        break;
    case PP_TUNE_TRIAL_START:
        if (progress)
            bar(ev->done, ev->total, cb);
        break;
    case PP_TUNE_TRIAL_NOT_STARTED:
        fprintf(stderr, "pptune search: trial not started: %s\n", ev->message);
        break;
    case PP_TUNE_TRIAL_DONE:
        if (ev->result->d_run > 0 && ev->result->d_run < ev->cfg->d)
            fprintf(stderr, "%spptune search: trial %s ran reduced: %s\n", progress ? "\n" : "",
                    cb, ev->result->where);
        if (strcmp(ev->result->status, "ok") != 0)
            fprintf(stderr, "\npptune search: trial %s: %s (%s), the search goes on\n", cb,
                    ev->result->status, ev->result->detail);
        break;
    case PP_TUNE_TRIAL_END:
        if (progress)
            bar(ev->total, ev->total, "done");
        break;
    }
}
