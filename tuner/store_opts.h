/* store_opts.h — private to the pptune program: the options `pptune publish` and `pptune fetch`
 * share (which store, timeouts, retries, verbosity) and the token from the environment. */
#ifndef PP_STORE_OPTS_H
#define PP_STORE_OPTS_H

#include "pp_profile.h"

typedef struct {
    pp_profile_http http;  /* url NULL: the local store */
    const char *local_dir; /* --local-store DIR, NULL: the XDG default */
    int verbose;
} pp_store_opts;

/* Defaults: url from PPTUNE_STORE_URL, token from PPTUNE_STORE_TOKEN, library timeouts. */
void pp_store_opts_init(pp_store_opts *s);
/* Consumes argv[*i] (and its value) when it is a store option: 1 consumed, 0 not one, -1 bad
 * value (message printed; exit 2). */
int pp_store_opts_option(const char *cmd, int argc, char **argv, int *i, pp_store_opts *s);
/* Help text for the shared options. */
void pp_store_opts_help(FILE *fp);
/* The local store directory (--local-store or the XDG default); caller frees. */
pp_status pp_store_opts_local_dir(const pp_store_opts *s, char **out);

#endif
