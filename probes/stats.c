/* stats.c — the statistics every probe shares: median and spread of repeated runs, and the
 * α-β (Hockney) fit of transfer time against message size.
 *
 * Not here: timing loops (each probe owns its own, since warm-up and synchronisation differ
 * between a memcpy, a thread hand-off and a CUDA stream).
 */
#include <math.h>
#include <stdlib.h>

#include "pp_probe.h"

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

/* Weighted least squares of t = α + γ·x with weights 1/t² (relative error), γ = 1/β.
 * Unweighted, the largest messages (milliseconds) would swamp the smallest (microseconds) and
 * α would come out as noise, or negative. x is scaled by its maximum to keep sums well
 * conditioned. If the best α is negative (latency below resolution), α = 0 and γ is refitted
 * through the origin. */
pp_status pp_fit_alpha_beta(const pp_xfer_point *pts, int n, double *alpha_s, double *beta_Bps)
{
    double xmax = 0, xmin = INFINITY;
    for (int i = 0; i < n; i++) {
        if (!(pts[i].seconds.median > 0) || pts[i].bytes < 0)
            return PP_ERR(PP_ERR_INVALID, "alpha-beta fit: point %d has size %g B and time %g s; "
                          "expected a size >= 0 and a time > 0", i, pts[i].bytes,
                          pts[i].seconds.median);
        xmax = fmax(xmax, pts[i].bytes);
        xmin = fmin(xmin, pts[i].bytes);
    }
    if (n < 2 || !(xmax > xmin))
        return PP_ERR(PP_ERR_INVALID, "alpha-beta fit needs at least 2 distinct message sizes, "
                      "got %d point(s)", n);
    double S = 0, Sx = 0, Sy = 0, Sxx = 0, Sxy = 0;
    for (int i = 0; i < n; i++) {
        double t = pts[i].seconds.median, x = pts[i].bytes / xmax, w = 1.0 / (t * t);
        S += w;
        Sx += w * x;
        Sy += w * t;
        Sxx += w * x * x;
        Sxy += w * x * t;
    }
    double den = S * Sxx - Sx * Sx;
    double g = den > 0 ? (S * Sxy - Sx * Sy) / den : 0;
    double a = (Sy - g * Sx) / S;
    if (a < 0) {
        a = 0;
        g = Sxy / Sxx;
    }
    if (!(g > 0))
        return PP_ERR(PP_ERR_INVALID, "alpha-beta fit: time does not grow with message size "
                      "(slope %g s per %g B); bandwidth cannot be estimated", g, xmax);
    *alpha_s = a;
    *beta_Bps = xmax / g;
    return PP_OK;
}
