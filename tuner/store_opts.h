/* store_opts.h — private to the pptune program: the options `pptune publish` and `pptune fetch`
 * share (which store, timeouts, retries, verbosity) and the token from the environment. */
#ifndef PP_STORE_OPTS_H
#define PP_STORE_OPTS_H

#include "cli.h"
#include "pp_profile.h"

typedef struct {
    pp_profile_http http;  /* url NULL: the local store */
    const char *local_dir; /* --local-store DIR, NULL: the XDG default */
    int verbose;
} pp_store_opts;

/* Defaults: url from PPTUNE_STORE_URL, token from PPTUNE_STORE_TOKEN, library timeouts. */
void pp_store_opts_init(pp_store_opts *s);
/* The store options' codes and getopt_long entries (with 'v' among the short options). */
enum {
    PP_STORE_OPT_URL = PP_CLI_STORE, PP_STORE_OPT_LOCAL, PP_STORE_OPT_TIMEOUT,
    PP_STORE_OPT_CONNECT_TIMEOUT, PP_STORE_OPT_RETRIES, PP_STORE_OPT_BACKOFF,
};
#define PP_STORE_OPTIONS                                                                           \
    {"verbose", no_argument, NULL, 'v'}, {"store", required_argument, NULL, PP_STORE_OPT_URL},    \
        {"local-store", required_argument, NULL, PP_STORE_OPT_LOCAL},                             \
        {"timeout", required_argument, NULL, PP_STORE_OPT_TIMEOUT},                               \
        {"connect-timeout", required_argument, NULL, PP_STORE_OPT_CONNECT_TIMEOUT},               \
        {"retries", required_argument, NULL, PP_STORE_OPT_RETRIES},                               \
        {"backoff", required_argument, NULL, PP_STORE_OPT_BACKOFF}
/* Applies option `code` just read by pp_cli_next(p) when it is a store option: 1 applied, 0
 * not one, -1 bad value (message printed; exit 2). */
int pp_store_opts_option(const pp_cli *p, int code, pp_store_opts *s);
/* Help text for the shared options. */
void pp_store_opts_help(FILE *fp);
/* The local store directory (--local-store or the XDG default); caller frees. */
pp_status pp_store_opts_local_dir(const pp_store_opts *s, char **out);

#endif
