/* pprun_line.c — the one builder of a pprun command line for a configuration, used by the
 * tuner's trials (an argv for execv), the profile's launch line and `pptune export --format
 * pprun` (strings). The configuration's words are its axes' flags (pp_config.h), in their line
 * order, each where its row says the line carries it; around them the words that are not the
 * configuration's: --model (or --model-config) first, --seq among them (PP_CONFIG_LINE_SEQ),
 * backend and precision last. Not here: which model a caller passes (the tuner's
 * pp_tune_pprun_model decides), and what a caller adds around the options (the program,
 * --steps, --json, ...). */
#include <stdio.h>
#include <string.h>

#include "pp_profile.h"

/* Whether the line carries axis a: its predicate, not a value pprun does not run at the line's
 * precision (pp_profile_pprun_unrun names it), and a flag without a value only when set. */
static int on_line(const pp_config *c, int precision, const pp_config_axis *a)
{
    if (a->on_line && !a->on_line(c))
        return 0;
    if (a->pprun_cannot && a->pprun_cannot(c, precision))
        return 0;
    return a->arg || a->kind == PP_CONFIG_SCHEDULE || pp_config_get(c, a);
}

int pp_profile_pprun_argv(const pp_profile_pprun_line *l,
                          char store[PP_PROFILE_PPRUN_MAX_ARGS][PP_PROFILE_PPRUN_ARG_LEN],
                          char **argv)
{
    const pp_config *c = l->config;
    const pp_config_axis *order[64];
    int n = 0, n_axes = pp_config_axes_by_line(order, 64), seq_done = 0;
    /* bounded: a line longer than the store is cut, never written past it (the test of the
     * longest line holds PP_PROFILE_PPRUN_MAX_ARGS to what the builder can emit) */
#define ARG(...)                                                                                   \
    (n < PP_PROFILE_PPRUN_MAX_ARGS                                                                 \
         ? (snprintf(store[n], PP_PROFILE_PPRUN_ARG_LEN, __VA_ARGS__), argv[n] = store[n], n++)    \
         : n)
    if (l->model_config) {
        ARG("--model-config");
        argv[n++] = (char *)l->model_config; /* a path of any length: the caller's, no copy */
    } else {
        ARG("--model"), ARG("%s", l->model);
    }
    if (l->layers > 0) /* a few blocks of a big model (pptune --layers) */
        ARG("--layers"), ARG("%d", l->layers);
    for (int i = 0; i <= n_axes; i++) {
        if (!seq_done && (i == n_axes || order[i]->line > PP_CONFIG_LINE_SEQ)) {
            ARG("--seq"), ARG("%d", l->seq);
            seq_done = 1;
        }
        if (i == n_axes || !on_line(c, l->precision, order[i]))
            continue;
        const pp_config_axis *a = order[i];
        ARG("%s", a->flag);
        if (a->kind == PP_CONFIG_SCHEDULE)
            ARG("%s", c->schedule);
        else if (a->kind == PP_CONFIG_ENUM)
            ARG("%s", pp_config_enum_name(a, pp_config_get(c, a)));
        else if (a->arg)
            ARG("%d", pp_config_get(c, a));
    }
    if (l->backend)
        ARG("--backend"), ARG("%s", l->backend);
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
    if (n == 0)
        return buf;
    buf[0] = '\0';
    /* each word as one shell word (the line is pasted into a shell): the model name is the
     * caller's */
    FILE *fp = fmemopen(buf, n, "w");
    if (!fp)
        return buf;
    for (int i = 0; i < argc; i++) {
        if (i)
            fputc(' ', fp);
        pp_fput_sh_word(fp, argv[i]);
    }
    long len = ftell(fp);
    fclose(fp);
    buf[len >= 0 && (size_t)len < n ? (size_t)len : n - 1] = '\0';
    return buf;
}

const char *pp_profile_pprun_unrun(const pp_config *c, int precision, char *buf, size_t n)
{
    int na;
    const pp_config_axis *a = pp_config_axes(&na);
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < na; i++) {
        const char *cannot = a[i].pprun_cannot ? a[i].pprun_cannot(c, precision) : NULL;
        if (a[i].flag && !cannot)
            continue; /* pprun takes it */
        int v = pp_config_get(c, &a[i]);
        if (v == a[i].dflt || len >= n)
            continue;
        if (a[i].kind == PP_CONFIG_ENUM)
            len += (size_t)snprintf(buf + len, n - len, "%s%s %s%s", len ? ", " : "", a[i].key,
                                    a[i].names[v], cannot ? cannot : "");
        else
            len += (size_t)snprintf(buf + len, n - len, "%s%s %d%s", len ? ", " : "", a[i].key, v,
                                    cannot ? cannot : "");
    }
    return len ? buf : NULL;
}
