/* pprun_line.c — the one builder of a pprun command line for a configuration, used by the
 * tuner's trials (an argv for execv), the profile's launch line and `pptune export --format
 * pprun` (strings). Whether --chunks and --group apply is the schedule registry's answer (a
 * tunable chunk count), never a schedule name. Not here: which model name a caller passes, and
 * what a caller adds around the options (the program, --steps, --json, ...). */
#include <string.h>

#include "pp_profile.h"
#include "pp_sched.h"

int pp_profile_pprun_argv(const pp_profile_pprun_line *l,
                          char store[PP_PROFILE_PPRUN_MAX_ARGS][PP_PROFILE_PPRUN_ARG_LEN],
                          char **argv)
{
    const pp_profile_config *c = l->config;
    int n = 0;
    /* bounded: a line longer than the store is cut, never written past it (the test of the
     * longest line holds PP_PROFILE_PPRUN_MAX_ARGS to what the builder can emit) */
#define ARG(...)                                                                                   \
    (n < PP_PROFILE_PPRUN_MAX_ARGS                                                                 \
         ? (snprintf(store[n], PP_PROFILE_PPRUN_ARG_LEN, __VA_ARGS__), argv[n] = store[n], n++)    \
         : n)
    ARG("--model"), ARG("%s", l->model);
    ARG("--schedule"), ARG("%s", c->schedule);
    ARG("--ranks"), ARG("%d", c->p);
    ARG("--microbatches"), ARG("%d", c->N);
    ARG("--micro-batch-size"), ARG("%d", c->b);
    const pp_sched_desc *d = pp_sched_lookup(c->schedule);
    if (d && d->chunks == 0) /* tunable chunks, and its group */
        ARG("--chunks"), ARG("%d", c->v), ARG("--group"), ARG("%d", c->G);
    ARG("--dp"), ARG("%d", c->d);
    if (c->t > 1) /* the runtime splits each stage over t ranks */
        ARG("--tp"), ARG("%d", c->t);
    ARG("--seq"), ARG("%d", l->seq);
    if (c->uneven)
        ARG("--uneven");
    if (c->first_layers)
        ARG("--first-stage-layers"), ARG("%d", c->first_layers);
    if (c->last_layers)
        ARG("--last-stage-layers"), ARG("%d", c->last_layers);
    if (l->cuda)
        ARG("--backend"), ARG("cuda");
    if (l->precision == PP_PREC_BF16)
        ARG("--precision"), ARG("bf16");
#undef ARG
    return n;
}

char *pp_profile_pprun_args(const pp_profile_pprun_line *l, char *buf, size_t n)
{
    char store[PP_PROFILE_PPRUN_MAX_ARGS][PP_PROFILE_PPRUN_ARG_LEN];
    char *argv[PP_PROFILE_PPRUN_MAX_ARGS];
    int argc = pp_profile_pprun_argv(l, store, argv);
    if (n)
        buf[0] = '\0';
    size_t len = 0;
    for (int i = 0; i < argc && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? " " : "", argv[i]);
    return buf;
}
