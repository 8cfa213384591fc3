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

static void print_figures(FILE *fp, const pp_profile *a, const pp_profile *b)
{
    const pp_profile_candidate *x = &a->chosen, *y = &b->chosen;
    fprintf(fp, "  predicted throughput  %.4g -> %.4g tokens/s (%+.1f %%)\n", x->tokens_per_s,
            y->tokens_per_s, 100 * rel(x->tokens_per_s, y->tokens_per_s));
    fprintf(fp, "  predicted step time   %.4g -> %.4g s\n", x->step_time_s, y->step_time_s);
    fprintf(
        fp,
        "  predicted peak memory %.4g -> %.4g GB per rank (%+.3g GB; capacity %.4g -> %.4g GB)\n",
        x->peak_bytes / 1e9, y->peak_bytes / 1e9, (y->peak_bytes - x->peak_bytes) / 1e9,
        x->capacity_bytes / 1e9, y->capacity_bytes / 1e9);
    double mx = pp_profile_measured_tokens_per_s(a, x), my = pp_profile_measured_tokens_per_s(b, y);
    fprintf(fp, "  measured              ");
    if (x->has_measured)
        fprintf(fp, "%s %.4g s/step %.4g tokens/s peak %.4g GB", x->measured_status,
                x->measured_step_time_s, mx, x->measured_peak_bytes / 1e9);
    else
        fprintf(fp, "(not trialled)");
    fprintf(fp, " -> ");
    if (y->has_measured)
        fprintf(fp, "%s %.4g s/step %.4g tokens/s peak %.4g GB\n", y->measured_status,
                y->measured_step_time_s, my, y->measured_peak_bytes / 1e9);
    else
        fprintf(fp, "(not trialled)\n");
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
