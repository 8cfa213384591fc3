/* stats.c — what every probe shares, the plugins too: median and spread of repeated runs,
 * the α-β (Hockney) fit of transfer time against message size, progress lines.
 *
 * Not here: timing loops (each probe owns its own, since warm-up and synchronisation differ
 * between a memcpy, a thread hand-off and a CUDA stream).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_impl.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

pp_measure pp_measure_of(double *x, int n)
{
    pp_measure m = {0};
    if (n <= 0)
        return m;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    m.min = x[0];
    m.max = x[n - 1];
    m.median = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
    m.samples = n;
    return m;
}

/* Hockney's model anchored at both ends of the sweep: α is the time of the smallest message
 * (where latency dominates), β the rate of the largest once α is taken off:
 *     β = bytes_max / (t_max − α).
 * A least-squares line through every size does worse for a cost model here: the middle sizes
 * sit in cache (on the 2-core VM this was written on, 2 MiB moved between threads at 27 GB/s,
 * 16 MiB at 1.6 GB/s), and the line's slope then predicts large transfers several times too
 * fast. The full sweep is kept beside the fit for anyone who wants a different model. */
pp_status pp_fit_alpha_beta(const pp_xfer_point *pts, int n, double *alpha_s, double *beta_Bps)
{
    int lo = -1, hi = -1;
    for (int i = 0; i < n; i++) {
        if (!(pts[i].seconds.median > 0) || !(pts[i].bytes >= 0))
            return PP_ERR(PP_ERR_INVALID,
                          "alpha-beta fit: point %d has size %g B and time %g s; "
                          "expected a size >= 0 and a time > 0",
                          i, pts[i].bytes, pts[i].seconds.median);
        if (lo < 0 || pts[i].bytes < pts[lo].bytes)
            lo = i;
        if (hi < 0 || pts[i].bytes > pts[hi].bytes)
            hi = i;
    }
    if (n < 2 || !(pts[hi].bytes > pts[lo].bytes))
        return PP_ERR(PP_ERR_INVALID,
                      "alpha-beta fit needs at least 2 distinct message sizes, "
                      "got %d point(s)",
                      n);
    /* α: the smallest message's time, less what its bytes cost at the large-message rate */
    double t_lo = pts[lo].seconds.median, t_hi = pts[hi].seconds.median;
    double g = (t_hi - t_lo) / (pts[hi].bytes - pts[lo].bytes); /* s per byte, first estimate */
    double a = t_lo - (g > 0 ? g * pts[lo].bytes : 0);
    if (a < 0)
        a = 0;
    if (!(t_hi > a))
        return PP_ERR(PP_ERR_INVALID,
                      "alpha-beta fit: %g B took %g s, no longer than %g B "
                      "(%g s); bandwidth cannot be estimated",
                      pts[hi].bytes, t_hi, pts[lo].bytes, t_lo);
    *alpha_s = a;
    *beta_Bps = pts[hi].bytes / (t_hi - a);
    return PP_OK;
}

pp_xfer_point *pp_xfer_copy(const pp_xfer_point *pts, int n)
{
    pp_xfer_point *c = pp_calloc((size_t)n + 1, sizeof *c);
    if (c && n > 0)
        memcpy(c, pts, (size_t)n * sizeof *c);
    return c;
}

void pp_probe_say(const pp_probe_opts *o, const char *fmt, ...)
{
    if (!o || !o->progress)
        return;
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    o->progress(o->progress_ctx, buf);
}
