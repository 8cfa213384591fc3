/* fmt.h — private to schedules/: helpers the renderers (fmt_*.c) share. */
#ifndef PP_SCHED_FMT_H
#define PP_SCHED_FMT_H

/* A round tick step (1, 2 or 5 times a power of ten) giving about `ticks` ticks over [0, span].
 * span must be positive. */
double pp_fmt_tick_step(double span, int ticks);

/* A decimal integer in [lo, hi] at *p, advancing *p past it. Returns 0 (and leaves *p) when
 * there is none or it is out of range. (action.c; the text parser uses it too.) */
int pp_fmt_scan_int(const char **p, long lo, long hi, int *out);

#endif
