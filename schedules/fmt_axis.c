/* fmt_axis.c — the time-axis arithmetic the ascii and SVG timelines share. */
#include <math.h>

#include "fmt.h"

double pp_fmt_tick_step(double span, int ticks)
{
    double raw = span / ticks, mag = pow(10, floor(log10(raw)));
    static const double steps[] = {1, 2, 5};
    for (int i = 0; i < 3; i++)
        if (steps[i] * mag >= raw)
            return steps[i] * mag;
    return 10 * mag;
}
