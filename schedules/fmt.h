/* fmt.h — private to schedules/: helpers the renderers (fmt_*.c) share. */
#ifndef PP_SCHED_FMT_H
#define PP_SCHED_FMT_H

/* A round tick step (1, 2 or 5 times a power of ten) giving about `ticks` ticks over [0, span].
 * span must be positive. */
double pp_fmt_tick_step(double span, int ticks);

#endif
