/* store_opts.c — the options `pptune publish` and `pptune fetch` share. The token is read from
 * the environment only (a command-line value would show in `ps` and shell history). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "store_opts.h"

static void log_stderr(void *ctx, const char *msg)
{
    fprintf(stderr, "pptune %s: %s\n", (const char *)ctx, msg);
}

void pp_store_opts_init(pp_store_opts *s)
{
    const char *url = getenv(PP_STORE_URL_ENV), *tok = getenv(PP_STORE_TOKEN_ENV);
    const char *insecure = getenv(PP_STORE_INSECURE_ENV);
    *s = (pp_store_opts){.http = {.url = url && *url ? url : NULL,
                                  .token = tok && *tok ? tok : NULL,
                                  .retries = -1,
                                  .allow_insecure_token = insecure && !strcmp(insecure, "1")}};
}

int pp_store_opts_option(const pp_cli *p, int code, pp_store_opts *s)
{
    const char *cmd = p->cmd, *o = p->name, *v = p->arg;
    double x;
    int k;
    switch (code) {
    case 'v':
        s->verbose = 1;
        s->http.log = log_stderr;
        s->http.log_ctx = (void *)cmd;
        return 1;
    case PP_STORE_OPT_URL: s->http.url = v; return 1;
    case PP_STORE_OPT_LOCAL: s->local_dir = v; return 1;
    case PP_STORE_OPT_RETRIES:
        if (!pp_cmd_parse_int(cmd, o, v, 0, &k))
            return -1;
        s->http.retries = k;
        return 1;
    case PP_STORE_OPT_TIMEOUT:
    case PP_STORE_OPT_CONNECT_TIMEOUT:
    case PP_STORE_OPT_BACKOFF:
        if (!pp_cmd_parse_double(cmd, o, v, 0.001, &x))
            return -1;
        if (code == PP_STORE_OPT_TIMEOUT)
            s->http.timeout_s = x;
        else if (code == PP_STORE_OPT_CONNECT_TIMEOUT)
            s->http.connect_timeout_s = x;
        else
            s->http.backoff_s = x;
        return 1;
    }
    return 0;
}

void pp_store_opts_help(FILE *fp)
{
    fprintf(fp, "store:\n"
                "  --store URL            HTTP store (default $" PP_STORE_URL_ENV "; none: the\n"
                "                         local store only)\n"
                "  --local-store DIR      local store (default $XDG_DATA_HOME/pptune/profiles)\n"
                "  --timeout S            one attempt, seconds (60); the whole command, retries\n"
                "                         included, ends within twice that, and an attempt\n"
                "                         moving under 1 KiB/s for 10 s is abandoned\n"
                "  --connect-timeout S    connection, seconds (10)\n"
                "  --retries N            retries on connection errors, timeouts and 5xx (3,\n"
                "                         at most 10)\n"
                "  --backoff S            first wait between retries, doubled each time, at\n"
                "                         most 30 s (0.5)\n"
                "  -v, --verbose          say each retry on stderr\n"
                "The bearer token is read from $" PP_STORE_TOKEN_ENV " and never printed; it is\n"
                "sent over plain http only to this machine (127.0.0.1, localhost) unless\n"
                "$" PP_STORE_INSECURE_ENV "=1.\n");
}

pp_status pp_store_opts_local_dir(const pp_store_opts *s, char **out)
{
    if (s->local_dir) {
        *out = pp_strdup(s->local_dir);
        return *out ? PP_OK : PP_ERR_NOMEM;
    }
    PP_TRY(pp_profile_store_dir(out));
    return PP_OK;
}
