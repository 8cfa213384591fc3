/* profile_diff.c — what changed between two profiles of a cluster, and whether it got slower.
 *
 * A CI job tunes a cluster again after a driver, library or hardware change and must notice a
 * drop of throughput. Throughput is compared on measured figures when both chosen candidates
 * were trialled successfully (they are what a training run will see), otherwise on predicted
 * ones; the report always says which. This file does not choose an exit code: the program does,
 * from pp_profile_diff.regression.
 */
#include <string.h>

#include "pp_profile.h"

/* Every axis that differs, one line each ("    p         4 -> 8"); whether one did. */
static int config_diff(FILE *fp, const pp_config *a, const pp_config *b)
{
    int n, changed = 0;
    const pp_config_axis *axes = pp_config_axes(&n);
    for (int i = 0; i < n; i++) {
        const pp_config_axis *x = &axes[i];
        char va[32], vb[32];
        if (!pp_config_axis_differs(a, b, x))
            continue;
        changed = 1;
        if (fp)
            fprintf(fp, "    %-9s %s -> %s\n", x->key, pp_config_value_str(a, x, va, sizeof va),
                    pp_config_value_str(b, x, vb, sizeof vb));
    }
    return changed;
}

static void describe_config(FILE *fp, const pp_config *c)
{
    char text[160];
    fputs(pp_config_str(c, text, sizeof text), fp);
}

static double rel(double a, double b)
{
    return a > 0 ? b / a - 1 : 0;
}

/* "ok 1.520 s/step 1,380,240 tokens/s peak 66.6 GiB", or "(not trialled)" */
static void measured(FILE *fp, const pp_profile *p, const pp_profile_candidate *c)
{
    char s[16], t[32], m[16];
    if (c->has_measured)
        fprintf(fp, "%s %s s/step %s tokens/s peak %s", c->measured_status,
                pp_fmt_seconds(c->measured_step_time_s, s, sizeof s),
                pp_fmt_grouped(pp_profile_measured_tokens_per_s(p, c), t, sizeof t),
                pp_fmt_bytes(c->measured_peak_bytes, m, sizeof m));
    else
        fprintf(fp, "(not trialled)");
}

/* The figures in the units of every other command (common/fmt.c): grouped tokens/s, seconds
 * to 4 significant digits, memory in binary units. */
static void print_figures(FILE *fp, const pp_profile *a, const pp_profile *b)
{
    const pp_profile_candidate *x = &a->chosen, *y = &b->chosen;
    char f[6][32];
    fprintf(fp, "  predicted throughput  %s -> %s tokens/s (%+.1f %%)\n",
            pp_fmt_grouped(x->tokens_per_s, f[0], 32), pp_fmt_grouped(y->tokens_per_s, f[1], 32),
            100 * rel(x->tokens_per_s, y->tokens_per_s));
    fprintf(fp, "  predicted step time   %s -> %s s\n", pp_fmt_seconds(x->step_time_s, f[0], 32),
            pp_fmt_seconds(y->step_time_s, f[1], 32));
    double dm = y->peak_bytes - x->peak_bytes;
    fprintf(fp, "  predicted peak memory %s -> %s per rank (%s%s; capacity %s -> %s)\n",
            pp_fmt_bytes(x->peak_bytes, f[0], 32), pp_fmt_bytes(y->peak_bytes, f[1], 32),
            dm < 0 ? "-" : "+", pp_fmt_bytes(dm < 0 ? -dm : dm, f[2], 32),
            pp_fmt_bytes(x->capacity_bytes, f[3], 32), pp_fmt_bytes(y->capacity_bytes, f[4], 32));
    fprintf(fp, "  measured              ");
    measured(fp, a, x);
    fprintf(fp, " -> ");
    measured(fp, b, y);
    fprintf(fp, "\n");
}

static void print_head(FILE *fp, const pp_profile *a, const pp_profile *b, pp_profile_diff *d)
{
    fprintf(fp, "profile diff: %s -> %s\n", a->name, b->name);
    fprintf(fp, "  cluster   %s x%d (%s)", b->cluster.name, b->cluster.nodes,
            b->cluster.fingerprint);
    if (d->cluster_changed)
        fprintf(fp, "   CHANGED from %s x%d (%s)", a->cluster.name, a->cluster.nodes,
                a->cluster.fingerprint);
    fprintf(fp, "\n  model     %s", b->model.name);
    if (d->model_changed)
        fprintf(fp, "   CHANGED from %s", a->model.name);
    fprintf(fp, "\n  created   %s -> %s\n", a->created, b->created);
}

pp_status pp_profile_diff_run(const pp_profile *old, const pp_profile *new_, double threshold,
                              FILE *fp, pp_profile_diff *out)
{
    if (!old->has_chosen || !new_->has_chosen)
        return PP_ERR(PP_ERR_INVALID,
                      "%s has no chosen configuration (nothing fitted): nothing "
                      "to compare",
                      old->has_chosen ? new_->name : old->name);
    if (!(threshold >= 0))
        return PP_ERR(PP_ERR_INVALID, "diff threshold must be >= 0, got %g", threshold);
    pp_profile_diff d = {0};
    d.cluster_changed = strcmp(old->cluster.fingerprint, new_->cluster.fingerprint) != 0;
    d.model_changed = strcmp(old->model.name, new_->model.name) != 0;
    const pp_profile_candidate *x = &old->chosen, *y = &new_->chosen;
    double mx = pp_profile_measured_tokens_per_s(old, x);
    double my = pp_profile_measured_tokens_per_s(new_, y);
    d.measured_basis = mx > 0 && my > 0;
    d.old_tokens_per_s = d.measured_basis ? mx : x->tokens_per_s;
    d.new_tokens_per_s = d.measured_basis ? my : y->tokens_per_s;
    d.throughput_change = rel(d.old_tokens_per_s, d.new_tokens_per_s);
    d.peak_bytes_change = d.measured_basis ? y->measured_peak_bytes - x->measured_peak_bytes
                                           : y->peak_bytes - x->peak_bytes;
    /* A small epsilon so that a drop of exactly the threshold (5.000 %) is not a regression
     * because of rounding in the JSON figures. */
    d.regression = d.throughput_change < -threshold - 1e-12;
    if (fp) {
        print_head(fp, old, new_, &d);
        fprintf(fp, "  chosen    ");
        describe_config(fp, &y->config);
        fprintf(fp, "\n");
    }
    if (fp && config_diff(NULL, &x->config, &y->config))
        fprintf(fp, "  configuration changed:\n");
    d.config_changed = config_diff(fp, &x->config, &y->config);
    if (fp && !d.config_changed)
        fprintf(fp, "  configuration unchanged\n");
    if (fp) {
        print_figures(fp, old, new_);
        fprintf(
            fp, "  throughput (%s): %+.2f %% (threshold -%.2f %%): %s\n",
            d.measured_basis ? "measured" : "predicted", 100 * d.throughput_change, 100 * threshold,
            d.regression ? "REGRESSION" : (d.throughput_change < 0 ? "within threshold" : "ok"));
    }
    if (out)
        *out = d;
    return PP_OK;
}
