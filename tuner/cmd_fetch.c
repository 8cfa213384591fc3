/* cmd_fetch.c — `pptune fetch --store URL --model M [--cluster C]`: downloads the profile of
 * this cluster and model from the HTTP store, verifies it, and writes it atomically into the
 * local store (or -o FILE). The cluster is identified by its fingerprint: from a cluster file,
 * a preset, a quick probe of this machine (the default), or given with --fingerprint. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "pp_probe.h"
#include "store_opts.h"

/* Exit code when the store has no profile for this cluster and model (HTTP 404): a CI job's
 * first run on a cluster, not a failure. */
#define FETCH_NOT_IN_STORE 4

static void usage(void)
{
    printf(
        "usage: pptune fetch --store URL --model M [--cluster C [--nodes N] | --fingerprint FP]\n"
        "                    [-o FILE] [options]\n\n"
        "Downloads <url>/<cluster fingerprint>/<M>.json, checks its SHA-256 against the\n"
        "store's X-Checksum-Sha256 header, validates it, and only then writes it (atomically)\n"
        "to the local store or FILE: on any failure the destination is left as it was.\n\n"
        "  --model M              the model name the profile was tuned for\n"
        "  --cluster C            cluster file (pptune probe -o), preset name, or 'local'\n"
        "                         (a quick probe of this machine; the default)\n"
        "  --nodes N              nodes of a preset (default 1)\n"
        "  --fingerprint FP       the cluster's fingerprint, instead of --cluster\n"
        "  -o FILE                destination (default: the local store; -o -: stdout)\n\n"
        "exit status: 0 fetched, 4 the store has no such profile, 1 the transfer failed,\n"
        "             2 bad usage, a refused token or an invalid profile\n\n");
    pp_store_opts_help(stdout);
}

typedef struct {
    const char *model, *cluster, *fingerprint, *out;
    int nodes;
} fetch_args;

static pp_status cluster_fingerprint(const fetch_args *a, char *fp, size_t n)
{
    pp_cluster *c = NULL;
    const char *name = a->cluster ? a->cluster : "local";
    pp_status st;
    if (!strcmp(name, "local")) {
        pp_probe_opts po = {.quick = 1};
        fprintf(stderr, "pptune fetch: probing this machine (quick) for its fingerprint...\n");
        st = pp_probe_run(&po, &c);
    } else if (strchr(name, '/') || strstr(name, ".json")) {
        st = pp_cluster_read(name, &c);
    } else {
        st = pp_cluster_load_preset(name, a->nodes, &c);
    }
    if (st == PP_OK)
        snprintf(fp, n, "%s", c->fingerprint);
    pp_cluster_destroy(c);
    PP_TRY(st);
    return PP_OK;
}

static int parse(int argc, char **argv, fetch_args *a, pp_store_opts *s)
{
    enum { MODEL = PP_CLI_LOCAL, CLUSTER, FINGERPRINT, NODES };
    static const struct option longopts[] = {
        PP_STORE_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {"model", required_argument, NULL, MODEL},
        {"cluster", required_argument, NULL, CLUSTER},
        {"fingerprint", required_argument, NULL, FINGERPRINT},
        {"nodes", required_argument, NULL, NODES},
        {0},
    };
    pp_cli p;
    pp_cli_init(&p, "fetch", argc, argv, "hvo:", longopts);
    p.unknown = "unknown option or argument";
    for (int c; (c = pp_cli_next(&p)) != -1;) {
        int rc = c == PP_CLI_BAD ? -1 : pp_store_opts_option(&p, c, s);
        if (rc < 0)
            return 2;
        if (rc > 0)
            continue;
        switch (c) {
        case 'h': usage(); return 0;
        case MODEL: a->model = p.arg; break;
        case CLUSTER: a->cluster = p.arg; break;
        case FINGERPRINT: a->fingerprint = p.arg; break;
        case 'o': a->out = p.arg; break;
        case NODES:
            if (!pp_cmd_parse_int("fetch", p.name, p.arg, 1, &a->nodes))
                return 2;
            break;
        }
    }
    int rc = pp_cli_no_words(&p);
    if (rc >= 0)
        return rc;
    if (!s->http.url)
        return pp_cmd_usage_error("fetch",
                                  "no store: give --store URL (or set " PP_STORE_URL_ENV ")");
    if (!a->model)
        return pp_cmd_usage_error("fetch", "--model M is required");
    if (a->cluster && a->fingerprint)
        return pp_cmd_usage_error("fetch", "give --cluster or --fingerprint, not both");
    return -1;
}

/* -o -: the fetched profile copied from its temporary file to stdout (the file removed). */
static pp_status to_stdout(const char *tmp)
{
    char *text = NULL;
    size_t len = 0;
    pp_status st = pp_file_read(tmp, &text, &len);
    if (st == PP_OK && (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0))
        st = PP_ERR(PP_ERR_IO, "-o -: writing the profile to stdout failed");
    free(text);
    return st;
}

int pp_cmd_fetch(int argc, char **argv)
{
    pp_store_opts s;
    pp_store_opts_init(&s);
    fetch_args a = {.nodes = 1};
    int rc = parse(argc, argv, &a, &s);
    if (rc >= 0)
        return rc;
    char fp[80], *dest = NULL, *dir = NULL;
    pp_status st = PP_OK;
    if (a.fingerprint)
        snprintf(fp, sizeof fp, "%s", a.fingerprint);
    else
        st = cluster_fingerprint(&a, fp, sizeof fp);
    char tmp[] = "/tmp/pptune-fetch-XXXXXX";
    int to_out = a.out && !pp_cli_output_path(a.out); /* -o -: through a private folder */
    if (to_out && !mkdtemp(tmp))
        st = PP_ERR(PP_ERR_IO, "-o -: cannot create a temporary folder in /tmp");
    if (st == PP_OK && a.out)
        dest = to_out ? pp_strjoin(tmp, "/", "profile.json") : pp_strdup(a.out);
    else if (st == PP_OK)
        st = pp_store_opts_local_dir(&s, &dir);
    if (st == PP_OK && !dest)
        st = pp_profile_store_path(dir, fp, a.model, &dest);
    int asked_store = st == PP_OK;
    if (asked_store)
        st = pp_profile_fetch(&s.http, fp, a.model, dest);
    if (st == PP_OK && to_out)
        st = to_stdout(dest);
    if (st == PP_OK)
        fprintf(to_out ? stderr : stdout, "fetched %s/%s.json to %s\n", fp, a.model,
                to_out ? "stdout" : dest);
    if (to_out && dest)
        unlink(dest), rmdir(tmp);
    free(dest);
    free(dir);
    if (st == PP_ERR_NOTFOUND && asked_store) {
        pp_cmd_fail("fetch", st);
        return FETCH_NOT_IN_STORE;
    }
    return st == PP_OK ? 0 : pp_cmd_fail("fetch", st);
}
