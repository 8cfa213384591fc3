/* sched_json.h — private to the pptune program: reading a schedule's JSON form (the one
 * pp_sched_write_json writes) back into a pp_sched, with jansson. */
#ifndef PP_SCHED_JSON_H
#define PP_SCHED_JSON_H

#include "pp_sched.h"

/* Parses `text` (the whole file; source_name is used in messages, e.g. the path) into a new
 * schedule the caller frees with pp_sched_destroy. Checks structure only — every field present
 * with the right type and in range — so the result is safe to give to pp_sched_check, which
 * judges the schedule. Metric fields (makespan, bubbles, ...) are ignored: --check recomputes
 * them. Errors are PP_ERR_PARSE with a message naming the file, the field path and what was
 * expected: `sched.json: ops[1][4].op: expected one of F, B, ..., got "X"`. */
pp_status pp_sched_read_json(const char *text, const char *source_name, pp_sched **out);

#endif
