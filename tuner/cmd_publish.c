/* cmd_publish.c — `pptune publish PROFILE [--store URL]`: validates a profile and puts it in the
 * HTTP store (PUT, SHA-256 checksum, bearer token from the environment) or, without a URL, in
 * the local store, under the key of its cluster fingerprint and model. */
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "store_opts.h"

static void usage(void)
{
    printf("usage: pptune publish PROFILE [--store URL] [options]\n\n"
           "Validates PROFILE and stores it under <cluster fingerprint>/<model>.json: with a\n"
           "URL by HTTP PUT (header X-Checksum-Sha256), else in the local store.\n\n");
    pp_store_opts_help(stdout);
}

/* The local store: a validated, byte-for-byte, atomic copy. */
static pp_status publish_local(const pp_store_opts *s, const char *file, char **dest)
{
    pp_profile *p = NULL;
    char *dir = NULL, *text = NULL, *path = NULL;
    size_t len;
    PP_TRY(pp_profile_read_text(file, &text, &len));
    pp_status st = pp_profile_parse(text, len, file, &p);
    if (st == PP_OK)
        st = pp_store_opts_local_dir(s, &dir);
    if (st == PP_OK)
        st = pp_profile_store_path(dir, p->cluster.fingerprint, p->model.name, &path);
    if (st == PP_OK)
        st = pp_profile_store_mkdirs(path);
    if (st == PP_OK)
        st = pp_file_write_atomic(path, text, len);
    pp_profile_destroy(p);
    free(dir);
    free(text);
    if (st != PP_OK) {
        free(path);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    *dest = path;
    return PP_OK;
}

int pp_cmd_publish(int argc, char **argv)
{
    pp_store_opts s;
    pp_store_opts_init(&s);
    const char *file = NULL;
    static const struct option longopts[] = {
        PP_STORE_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    pp_cli p;
    pp_cli_init(&p, "publish", argc, argv, "hv", longopts);
    for (int c; (c = pp_cli_next(&p)) != -1;) {
        if (c == 'h') {
            usage();
            return 0;
        }
        if (c == PP_CLI_BAD || pp_store_opts_option(&p, c, &s) < 0)
            return 2;
    }
    for (int i = optind; i < argc; i++) {
        if (file)
            return pp_cmd_usage_error("publish", "expected one profile, got a second: \"%s\"",
                                      argv[i]);
        file = argv[i];
    }
    if (!file)
        return pp_cmd_usage_error("publish", "expected the profile to publish");
    char *where = NULL;
    pp_status st =
        s.http.url ? pp_profile_publish(&s.http, file, &where) : publish_local(&s, file, &where);
    if (st != PP_OK)
        return pp_cmd_fail("publish", st);
    if (s.http.url)
        printf("published %s as %s to %s\n", file, where, s.http.url);
    else
        printf("published %s to the local store: %s\n", file, where);
    free(where);
    return 0;
}
