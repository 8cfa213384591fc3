/* test_profiles_store.c — the HTTP store against a real server on 127.0.0.1
 * (tests/fixtures/store_server.py, started and stopped by each test): publish and fetch, and
 * every fault — server down, 500 then success, 500 for good, slower than the timeout, a body
 * cut short, a wrong checksum, 401 without and with a wrong token, 404, the wrong profile —
 * gives a clear error and leaves the local store exactly as it was. */
#include "profiles_test.h"

#define TINY_FP "fnv1a64:dd91123eca1202b2"
#define TINY_KEY "fnv1a64-dd91123eca1202b2/tiny.json"

typedef struct {
    char dir[64], root[128], local[128], dest[256], log[128];
    char before[8192];
    pt_server srv;
} env;

/* A server root holding the tiny profile, and a local store already holding an older copy of
 * it (so "unchanged" means the old bytes are still there, not merely that nothing appeared). */
static void env_init(env *e)
{
    char path[512];
    *e = (env){0};
    pt_tmpdir(e->dir, sizeof e->dir);
    snprintf(e->root, sizeof e->root, "%s/root", e->dir);
    snprintf(e->local, sizeof e->local, "%s/local", e->dir);
    snprintf(e->log, sizeof e->log, "%s/requests.log", e->dir);
    snprintf(path, sizeof path, "%s/profiles/" TINY_KEY, e->root);
    cr_assert_eq(pp_profile_store_mkdirs(path), PP_OK);
    pt_copy(FIX "tiny-local.json", path);
    snprintf(e->dest, sizeof e->dest, "%s/" TINY_KEY, e->local);
    cr_assert_eq(pp_profile_store_mkdirs(e->dest), PP_OK);
    cr_assert_eq(pp_file_write_atomic(e->dest, "{\"older\": true}\n", 16), PP_OK);
    pt_tree(e->local, e->before, sizeof e->before);
}

static void assert_local_unchanged(const env *e)
{
    char now[8192];
    pt_tree(e->local, now, sizeof now);
    cr_assert_str_eq(now, e->before, "the local store changed:\nbefore:\n%s\nafter:\n%s", e->before,
                     now);
}

static int count_lines(const char *path, const char *needle)
{
    char *text = NULL;
    size_t len;
    if (pp_file_read(path, &text, &len) != PP_OK)
        return 0;
    int n = 0;
    for (char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(text);
    return n;
}

static pp_profile_http quick(const env *e)
{
    return (pp_profile_http){.url = e->srv.url,
                             .connect_timeout_s = 2,
                             .timeout_s = 10,
                             .retries = 3,
                             .backoff_s = 0.05};
}

static void assert_fetched(const env *e)
{
    pt_assert_same_file(e->dest, FIX "tiny-local.json");
}

Test(profiles_http, publish_then_fetch_round_trips_the_bytes)
{
    env e;
    env_init(&e);
    char up[256];
    snprintf(up, sizeof up, "%s/up", e.dir);
    mkdir(up, 0755);
    pt_server_start(&e.srv, up, "ok", "--log", e.log, NULL);
    pp_profile_http h = quick(&e);
    char *key = NULL;
    cr_assert_eq(pp_profile_publish(&h, FIX "tiny-local.json", &key), PP_OK, "%s", pp_err_msg());
    cr_assert_str_eq(key, TINY_KEY);
    free(key);
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_OK, "%s", pp_err_msg());
    pt_server_stop(&e.srv);
    assert_fetched(&e);
    char stored[512];
    snprintf(stored, sizeof stored, "%s/profiles/" TINY_KEY, up);
    pt_assert_same_file(stored, FIX "tiny-local.json");
    cr_assert_eq(count_lines(e.log, "PUT /profiles/" TINY_KEY " token=none 201"), 1);
}

Test(profiles_http, server_down_is_a_connection_error_after_the_retries)
{
    env e;
    env_init(&e);
    pt_server_start(&e.srv, e.root, "down", NULL);
    pt_server_stop(&e.srv);
    pp_profile_http h = quick(&e);
    h.retries = 2;
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_IO);
    cr_assert(strstr(pp_err_text(), "GET http://127.0.0.1:"), "%s", pp_err_text());
    cr_assert(strstr(pp_err_text(), "(after 3 attempts)"), "%s", pp_err_text());
    assert_local_unchanged(&e);
}

Test(profiles_http, error_500_then_success_is_retried)
{
    env e;
    env_init(&e);
    pt_server_start(&e.srv, e.root, "flaky", "--fail-count", "2", "--log", e.log, NULL);
    pp_profile_http h = quick(&e);
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_OK, "%s", pp_err_msg());
    pt_server_stop(&e.srv);
    cr_assert_eq(count_lines(e.log, " 500\n"), 2);
    cr_assert_eq(count_lines(e.log, " 200\n"), 1);
    assert_fetched(&e);
}

Test(profiles_http, error_500_beyond_the_retries_fails_and_keeps_the_store)
{
    env e;
    env_init(&e);
    pt_server_start(&e.srv, e.root, "flaky", "--fail-count", "100", "--log", e.log, NULL);
    pp_profile_http h = quick(&e);
    h.retries = 2;
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_IO);
    pt_server_stop(&e.srv);
    cr_assert(strstr(pp_err_text(), "HTTP 500 (after 3 attempts)"), "%s", pp_err_text());
    cr_assert_eq(count_lines(e.log, " 500\n"), 3);
    assert_local_unchanged(&e);
}

Test(profiles_http, slower_than_the_timeout_times_out)
{
    env e;
    env_init(&e);
    pt_server_start(&e.srv, e.root, "slow", "--delay", "3", NULL);
    pp_profile_http h = quick(&e);
    h.timeout_s = 0.5;
    h.retries = 1;
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_TIMEOUT);
    pt_server_stop(&e.srv);
    cr_assert(strstr(pp_err_text(), "(after 2 attempts)"), "%s", pp_err_text());
    cr_assert(strstr(pp_err_text(), "imed out"), "%s", pp_err_text());
    assert_local_unchanged(&e);
}

Test(profiles_http, truncated_body_is_refused)
{
    env e;
    env_init(&e);
    pt_server_start(&e.srv, e.root, "truncated", NULL);
    pp_profile_http h = quick(&e);
    h.retries = 1;
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_IO);
    pt_server_stop(&e.srv);
    cr_assert(strstr(pp_err_text(), "bytes remaining"), "%s", pp_err_text());
    assert_local_unchanged(&e);
}

Test(profiles_http, wrong_checksum_is_refused)
{
    env e;
    env_init(&e);
    pt_server_start(&e.srv, e.root, "badsum", "--log", e.log, NULL);
    pp_profile_http h = quick(&e);
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_IO);
    pt_server_stop(&e.srv);
    cr_assert(strstr(pp_err_text(), "checksum mismatch"), "%s", pp_err_text());
    cr_assert_eq(count_lines(e.log, "GET "), 1);
    assert_local_unchanged(&e);
}

Test(profiles_http, unauthorized_without_and_with_a_wrong_token_is_not_retried)
{
    env e;
    env_init(&e);
    const char *secret = "s3cr3t-Tok3n-4f9a";
    pt_server_start(&e.srv, e.root, "auth", "--token", secret, "--log", e.log, NULL);
    pp_profile_http h = quick(&e);
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "HTTP 401"), "%s", pp_err_text());
    cr_assert(strstr(pp_err_text(), "needs a bearer token"), "%s", pp_err_text());
    assert_local_unchanged(&e);
    h.token = "s3cr3t-Wr0ng-0000";
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "bearer token was not accepted"), "%s", pp_err_text());
    cr_assert_null(strstr(pp_err_msg(), "s3cr3t"), "the token leaked: %s", pp_err_msg());
    assert_local_unchanged(&e);
    h.token = secret;
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_OK, "%s", pp_err_msg());
    pt_server_stop(&e.srv);
    cr_assert_eq(count_lines(e.log, "token=none 401"), 1);
    cr_assert_eq(count_lines(e.log, "token=wrong 401"), 1);
    cr_assert_eq(count_lines(e.log, "token=ok 200"), 1);
    assert_fetched(&e);
}

Test(profiles_http, missing_profile_is_not_found_at_once)
{
    env e;
    env_init(&e);
    pt_server_start(&e.srv, e.root, "ok", "--log", e.log, NULL);
    pp_profile_http h = quick(&e);
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "gpt-13b", e.dest), PP_ERR_NOTFOUND);
    pt_server_stop(&e.srv);
    cr_assert(strstr(pp_err_text(), "no such profile in the store (HTTP 404)"), "%s",
              pp_err_text());
    cr_assert_eq(count_lines(e.log, "GET "), 1);
    assert_local_unchanged(&e);
}

Test(profiles_http, a_profile_of_another_model_is_refused)
{
    env e;
    env_init(&e);
    char path[512];
    snprintf(path, sizeof path, "%s/profiles/fnv1a64-dd91123eca1202b2/small.json", e.root);
    pt_copy(FIX "tiny-local.json", path);
    pt_server_start(&e.srv, e.root, "ok", NULL);
    pp_profile_http h = quick(&e);
    char dest[512];
    snprintf(dest, sizeof dest, "%s/fnv1a64-dd91123eca1202b2/small.json", e.local);
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "small", dest), PP_ERR_PARSE);
    pt_server_stop(&e.srv);
    cr_assert(strstr(pp_err_text(), "expected cluster " TINY_FP ", model small"), "%s",
              pp_err_text());
    assert_local_unchanged(&e);
}

Test(profiles_http, an_invalid_profile_is_not_published)
{
    env e;
    env_init(&e);
    pt_server_start(&e.srv, e.root, "ok", "--log", e.log, NULL);
    char bad[256];
    snprintf(bad, sizeof bad, "%s/bad.json", e.dir);
    cr_assert_eq(pp_file_write_atomic(bad, "{\"schema\": \"pptune-profile\"}", 28), PP_OK);
    pp_profile_http h = quick(&e);
    cr_assert_eq(pp_profile_publish(&h, bad, NULL), PP_ERR_PARSE);
    pt_server_stop(&e.srv);
    cr_assert(strstr(pp_err_text(), "field \"version\""), "%s", pp_err_text());
    cr_assert_eq(count_lines(e.log, "PUT "), 0);
}

/* ---- hostile servers and options (issue 18, findings 8 and 9) -------------------------------- */

Test(profiles_http, a_slow_drip_server_cannot_hold_a_fetch_past_the_deadline, .timeout = 60)
{
    env e;
    env_init(&e);
    pt_server_start(&e.srv, e.root, "drip", "--delay", "0.5", NULL);
    pp_profile_http h = quick(&e);
    h.deadline_s = 2; /* the attempt's own timeout (10 s) and the retries would allow far more */
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_TIMEOUT, "%s",
                 pp_err_msg());
    pt_server_stop(&e.srv);
    assert_local_unchanged(&e);
}

Test(profiles_http, absurd_retry_options_are_refused_before_any_request)
{
    env e;
    env_init(&e);
    pt_server_start(&e.srv, e.root, "ok", "--log", e.log, NULL);
    pp_profile_http h = quick(&e);
    h.backoff_s = 1e19; /* nanosleep refused it with EINVAL and the loop spun */
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "--backoff 1e+19"), "%s", pp_err_text());
    h = quick(&e);
    h.retries = 1000000;
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "--retries 1000000: at most 10"), "%s", pp_err_text());
    pt_server_stop(&e.srv);
    cr_assert_eq(count_lines(e.log, "GET "), 0, "a request went out");
    assert_local_unchanged(&e);
}

Test(profiles_http, tokens_that_would_inject_headers_or_travel_in_clear_are_refused)
{
    env e;
    env_init(&e);
    pt_server_start(&e.srv, e.root, "ok", "--log", e.log, NULL);
    pp_profile_http h = quick(&e);
    h.token = "secret\r\nX-Injected: yes";
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "contains a control character"), "%s", pp_err_text());
    cr_assert_null(strstr(pp_err_text(), "secret"), "the token was printed: %s", pp_err_text());
    pt_server_stop(&e.srv);
    cr_assert_eq(count_lines(e.log, "GET "), 0, "a request went out");
    /* plain http to a host that is not loopback by name (0.0.0.0 still reaches only this
     * machine, so nothing could leave it even if the check failed) */
    h = quick(&e);
    h.url = "http://0.0.0.0:9/store";
    h.token = "secret";
    h.retries = 0;
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "unencrypted"), "%s", pp_err_text());
    h.allow_insecure_token = 1; /* allowed: it is tried (and nothing listens there) */
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_IO, "%s", pp_err_msg());
    assert_local_unchanged(&e);
}

Test(profiles_http, what_a_hostile_store_sends_is_not_echoed)
{
    env e;
    env_init(&e);
    pt_server_start(&e.srv, e.root, "evilsum", NULL);
    pp_profile_http h = quick(&e);
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_IO);
    pt_server_stop(&e.srv);
    cr_assert(strstr(pp_err_text(), "malformed"), "%s", pp_err_text());
    cr_assert_null(strchr(pp_err_text(), '\x1b'), "a terminal escape was echoed");
    cr_assert_null(strstr(pp_err_text(), "pwned"), "%s", pp_err_text());
    assert_local_unchanged(&e);
    /* userinfo holding '/' and '@' is hidden too */
    h = quick(&e);
    char url[512];
    snprintf(url, sizeof url, "http://user:pa/ss@w0rd@127.0.0.1:%s", strrchr(e.srv.url, ':') + 1);
    h.url = url;
    h.retries = 0;
    cr_assert_neq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_OK);
    cr_assert_null(strstr(pp_err_text(), "pa/ss"), "%s", pp_err_text());
    cr_assert_null(strstr(pp_err_text(), "w0rd"), "%s", pp_err_text());
}

/* Issue 30: a store that answers with the request's headers as its body had the start of it
 * (the bearer token) quoted by the JSON parse error, terminal escapes included. */
Test(profiles_http, a_store_echoing_the_request_gets_nothing_of_it_printed)
{
    env e;
    env_init(&e);
    const char *secret = "s3cr3t-Echo-4242";
    pt_server_start(&e.srv, e.root, "echo", NULL);
    pp_profile_http h = quick(&e);
    h.token = secret;
    cr_assert_eq(pp_profile_fetch(&h, TINY_FP, "tiny", e.dest), PP_ERR_PARSE, "%s",
                 pp_err_text());
    pt_server_stop(&e.srv);
    cr_assert(strstr(pp_err_text(), "is not JSON"), "%s", pp_err_text());
    cr_assert_null(strstr(pp_err_msg(), "s3cr3t"), "the token leaked: %s", pp_err_msg());
    cr_assert_null(strstr(pp_err_msg(), "Authorization"), "the headers leaked: %s", pp_err_msg());
    cr_assert_null(strchr(pp_err_msg(), '\x1b'), "a terminal escape was echoed");
    assert_local_unchanged(&e);
}
