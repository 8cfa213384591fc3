/* pp_rt_trace.h — Chrome traces of a run's steps (runtime/trace.c).
 * Part of the runtime's public headers (pp_rt.h includes them all); stands alone.
 */
#ifndef PP_RT_TRACE_H
#define PP_RT_TRACE_H

#include "pp_common.h"
#include "pp_rt_executor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the timed actions of steps as a Chrome trace (JSON "traceEvents", opens in Perfetto
 * and chrome://tracing): one track per global rank, one complete event per action, plus the
 * gradient sync and optimizer phases, a flow arrow from every SEND to its RECV, and a track
 * with each step. Written to PATH.tmp.<pid>, renamed on commit; tr reads the executor's
 * schedule, so commit or abort it before destroying the executor. */
typedef struct pp_rt_trace pp_rt_trace;
/* Opens the trace into *out (freed by commit or abort; ex is borrowed). Returns PP_OK, or
 * PP_ERR_IO when PATH.tmp.<pid> cannot be created. */
pp_status pp_rt_trace_open(const char *path, const pp_rt_executor *ex, pp_rt_trace **out);
/* Adds step r (r's spans are read now). t0: seconds from the start of the run to the start
 * of this step. Returns PP_OK, or PP_ERR_IO when the write fails. */
pp_status pp_rt_trace_add_step(pp_rt_trace *tr, int step, double t0, const pp_rt_step_result *r);
/* Both free tr. commit writes the end of the trace and renames it to PATH: returns PP_OK, or
 * the error of the write, fsync or rename; abort removes the temporary file. */
pp_status pp_rt_trace_commit(pp_rt_trace *tr);
void pp_rt_trace_abort(pp_rt_trace *tr);

#ifdef __cplusplus
}
#endif
#endif
