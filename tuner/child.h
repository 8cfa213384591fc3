/* child.h — private to the tuner library: one program run as a child with a time limit, its
 * stdout and stderr read into bounded buffers (child.c). The trials (trials.c) and the probes
 * over an allocation (alloc_probe.c) run through it. */
#ifndef PP_TUNE_CHILD_H
#define PP_TUNE_CHILD_H

#include <stddef.h>

#include "pp_common.h"

typedef struct {
    char *out, *err; /* NUL-terminated (head and tail kept when large), or NULL when empty */
    int wstatus;     /* waitpid's status; meaningless when killed */
    int killed;      /* 1: it ran past its limit and its process group was ended */
    double wall_s;   /* from fork to the end of reaping */
} pp_tune_child;

/* Runs argv (argv[0] through PATH) in its own process group with stdout and stderr piped, for
 * at most timeout_s seconds; past it the whole group gets SIGTERM, then SIGKILL (and whatever
 * the child left running in its group is ended either way). Fills *c (pp_tune_child_fini frees
 * it). Errors: fork or pipe failing only; the child's failure is in *c. */
pp_status pp_tune_child_run(char *const *argv, double timeout_s, pp_tune_child *c);
void pp_tune_child_fini(pp_tune_child *c);

#endif
