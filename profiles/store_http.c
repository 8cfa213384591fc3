/* store_http.c — the HTTP profile store: PUT and GET of <url>/<key> through libcurl.
 *
 * Each attempt has a connect timeout, a total timeout and a low-speed limit (under 1 KiB/s for
 * PP_PROFILE_HTTP_LOW_SPEED_S), and the whole operation a deadline that bounds every attempt
 * and wait; connection errors, timeouts, bodies cut short and 5xx answers are retried with
 * exponential backoff (backoff_s, 2 backoff_s, ..., each wait capped), 4xx answers never (the
 * request itself is wrong: retrying cannot help). What the network sends is never printed as
 * received: a mismatch names what was expected, a malformed checksum header is described, not
 * echoed. A token with control characters is refused (it would inject headers), and so is a
 * token over plain http to a host other than this machine unless allow_insecure_token is set. The body's SHA-256
 * travels in X-Checksum-Sha256 both ways. A fetched profile is verified (checksum, schema, the
 * fingerprint and model asked for) before it is written, atomically, so a failure leaves the
 * destination as it was. The bearer token goes only into the Authorization header: no message
 * built here contains it, and curl's verbose mode (which would print headers) is never enabled.
 * Redirects are not followed, so the token is never sent to another host.
 *
 * Not here: a server (tests/fixtures/store_server.py is the test one), listing or deleting.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "pp_profile.h"

#define MAX_BODY (64u << 20) /* a profile is kilobytes; refuse anything absurd */

typedef struct {
    char *data;
    size_t len, cap;
    int too_big;
} body_buf;

typedef struct {
    const char *data; /* upload */
    size_t len, off;
} upload;

typedef struct {
    long http;
    CURLcode cc;
    char curl_err[CURL_ERROR_SIZE];
    body_buf body;
    char checksum[65];
    int has_checksum;
} response;

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    body_buf *b = ud;
    size_t n = size * nmemb;
    if (b->len + n + 1 > MAX_BODY) {
        b->too_big = 1;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    }
    size_t cap = pp_grow_max(&b->data, b->len + n, b->cap, 1, 4096, MAX_BODY); /* bytes, NUL */
    if (!cap)
        return 0;
    b->cap = cap;
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

/* Picks X-Checksum-Sha256 out of the response headers (names are case-insensitive). */
static size_t on_header(char *line, size_t size, size_t nitems, void *ud)
{
    response *r = ud;
    size_t n = size * nitems;
    static const char name[] = "x-checksum-sha256:";
    size_t k = sizeof name - 1;
    if (n > k && strncasecmp(line, name, k) == 0) {
        const char *v = line + k;
        size_t vl = n - k;
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        size_t hex = 0;
        while (hex < vl && strchr("0123456789abcdefABCDEF", v[hex]) && v[hex])
            hex++;
        if (vl == 64 && hex == 64) {
            for (size_t i = 0; i < 64; i++)
                r->checksum[i] = (char)((v[i] >= 'A' && v[i] <= 'F') ? v[i] - 'A' + 'a' : v[i]);
            r->checksum[64] = '\0';
            r->has_checksum = 1;
        } else if (vl == 64) {
            snprintf(r->checksum, sizeof r->checksum, "(malformed: not hexadecimal)");
            r->has_checksum = 1;
        } else {
            snprintf(r->checksum, sizeof r->checksum, "(malformed, %zu characters)", vl);
            r->has_checksum = 1;
        }
    }
    return n;
}

static size_t on_read(char *dst, size_t size, size_t nmemb, void *ud)
{
    upload *u = ud;
    size_t n = size * nmemb, left = u->len - u->off;
    if (n > left)
        n = left;
    memcpy(dst, u->data + u->off, n);
    u->off += n;
    return n;
}

/* The URL without its userinfo (user:password@, which may itself hold '/' or '@'), for
 * messages: everything between "://" and the last '@' before any '?' or '#' is hidden. */
static void redact(const char *url, char *out, size_t n)
{
    const char *scheme = strstr(url, "://");
    const char *host = scheme ? scheme + 3 : url;
    size_t span = strcspn(host, "?#");
    const char *at = NULL;
    for (const char *q = host; q < host + span; q++)
        if (*q == '@')
            at = q;
    if (at)
        snprintf(out, n, "%.*s***@%s", (int)(host - url), url, at + 1);
    else
        snprintf(out, n, "%s", url);
}

/* Whether the URL's host is this machine (127.0.0.0/8, localhost, [::1]): a token sent there
 * over http never crosses a network. */
static int loopback_url(const char *url)
{
    const char *host = strstr(url, "://");
    host = host ? host + 3 : url;
    const char *at = strrchr(host, '@'), *slash = strchr(host, '/');
    if (at && (!slash || at < slash))
        host = at + 1;
    return !strncmp(host, "127.", 4) || !strncmp(host, "localhost", 9) ||
           !strncmp(host, "[::1]", 5);
}

/* The whole operation's limit in seconds: deadline_s, else twice one attempt's timeout. */
static double deadline_s(const pp_profile_http *h)
{
    return h->deadline_s > 0 ? h->deadline_s : 2 * (h->timeout_s > 0 ? h->timeout_s : 60);
}

static void set_common(CURL *c, const pp_profile_http *h, double left_s, response *r)
{
    double ct = h->connect_timeout_s > 0 ? h->connect_timeout_s : 10;
    double tt = h->timeout_s > 0 ? h->timeout_s : 60;
    if (tt > left_s)
        tt = left_s;
    if (ct > tt)
        ct = tt;
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(ct * 1000) + 1);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(tt * 1000) + 1);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)PP_PROFILE_HTTP_LOW_SPEED_S);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* timeouts without SIGALRM (thread-safe) */
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, r->curl_err);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r->body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
}

/* One request. put_body NULL: GET. Returns PP_ERR_NOMEM only; the outcome is in r. */
static pp_status request_once(const pp_profile_http *h, const char *url, const char *put_body,
                              size_t put_len, const char *sha, double left_s, response *r)
{
    free(r->body.data);
    *r = (response){0};
    CURL *c = curl_easy_init();
    if (!c)
        return PP_ERR(PP_ERR_NOMEM, "curl_easy_init failed");
    struct curl_slist *hd = NULL;
    char line[160];
    upload up = {.data = put_body, .len = put_len};
    set_common(c, h, left_s, r);
    curl_easy_setopt(c, CURLOPT_URL, url);
    if (put_body) {
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &up);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)put_len);
        snprintf(line, sizeof line, "X-Checksum-Sha256: %s", sha);
        hd = curl_slist_append(hd, line);
        hd = curl_slist_append(hd, "Content-Type: application/json");
        hd = curl_slist_append(hd, "Expect:"); /* no 100-continue round trip */
    }
    /* The token's header is built, used and wiped here; it never reaches a message. */
    char *auth = NULL;
    if (h->token && *h->token) {
        size_t n = strlen(h->token) + 32;
        auth = malloc(n);
        if (auth) {
            snprintf(auth, n, "Authorization: Bearer %s", h->token);
            hd = curl_slist_append(hd, auth);
        }
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
    r->cc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->http);
    curl_slist_free_all(hd);
    if (auth) {
        memset(auth, 0, strlen(auth));
        free(auth);
    }
    curl_easy_cleanup(c);
    return PP_OK;
}

static int transient_curl(CURLcode cc)
{
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
        return 1;
    default:
        return 0;
    }
}

/* Describes a failed attempt into why; returns 1 when it is worth retrying. */
static int describe(const response *r, char *why, size_t n)
{
    if (r->cc != CURLE_OK) {
        if (r->body.too_big)
            snprintf(why, n, "the answer is larger than %u MiB: not a profile", MAX_BODY >> 20);
        else
            snprintf(why, n, "%s", r->curl_err[0] ? r->curl_err : curl_easy_strerror(r->cc));
        return transient_curl(r->cc);
    }
    snprintf(why, n, "HTTP %ld", r->http);
    return r->http >= 500;
}

static void sleep_s(double s) /* s in [0, 30] (request caps it) */
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Options and token checked before anything is sent. */
static pp_status check_http(const pp_profile_http *h, const char *url)
{
    if (h->retries > PP_PROFILE_HTTP_MAX_RETRIES)
        return PP_ERR(PP_ERR_INVALID, "--retries %d: at most %d", h->retries,
                      PP_PROFILE_HTTP_MAX_RETRIES);
    if (!(h->backoff_s >= 0 && h->backoff_s <= 30))
        return PP_ERR(PP_ERR_INVALID, "--backoff %g: expected 0 to 30 seconds", h->backoff_s);
    double limits[3] = {h->timeout_s, h->connect_timeout_s, h->deadline_s};
    static const char *const names[3] = {"--timeout", "--connect-timeout", "the deadline"};
    for (int i = 0; i < 3; i++)
        if (!(limits[i] >= 0 && limits[i] <= 86400))
            return PP_ERR(PP_ERR_INVALID, "%s %g: expected 0 to 86400 seconds", names[i],
                          limits[i]);
    if (h->token && *h->token) {
        for (const unsigned char *t = (const unsigned char *)h->token; *t; t++)
            if (*t < 0x20 || *t == 0x7f)
                return PP_ERR(PP_ERR_INVALID,
                              "the store token (" PP_STORE_TOKEN_ENV ") contains a control "
                              "character (a newline?): refusing to send it");
        if (!strncmp(url, "http://", 7) && !loopback_url(url) && !h->allow_insecure_token)
            return PP_ERR(PP_ERR_INVALID,
                          "the store URL is plain http: the bearer token would cross the network "
                          "unencrypted; use https://, or allow it explicitly "
                          "(" PP_STORE_INSECURE_ENV "=1)");
    }
    return PP_OK;
}

/* The error for a final failure: status kind from what happened, message with the URL. */
static pp_status final_error(const response *r, const char *method, const char *shown, int tries,
                             int token_sent)
{
    char why[CURL_ERROR_SIZE + 64];
    describe(r, why, sizeof why);
    if (r->cc == CURLE_OPERATION_TIMEDOUT)
        return PP_ERR(PP_ERR_TIMEOUT, "%s %s: %s (after %d attempt%s)", method, shown, why, tries,
                      tries == 1 ? "" : "s");
    if (r->cc != CURLE_OK || r->http >= 500)
        return PP_ERR(PP_ERR_IO, "%s %s: %s (after %d attempt%s)", method, shown, why, tries,
                      tries == 1 ? "" : "s");
    if (r->http == 401 || r->http == 403)
        return PP_ERR(PP_ERR_INVALID, "%s %s: the store refused the request (HTTP %ld): %s", method,
                      shown, r->http,
                      token_sent ? "the bearer token was not accepted"
                                 : "it needs a bearer token (set PPTUNE_STORE_TOKEN)");
    if (r->http == 404)
        return PP_ERR(PP_ERR_NOTFOUND, "%s %s: no such profile in the store (HTTP 404)", method,
                      shown);
    return PP_ERR(PP_ERR_INVALID, "%s %s: the store answered HTTP %ld", method, shown, r->http);
}

/* Runs the request with retries; on PP_OK, r holds a 2xx answer. */
static pp_status request(const pp_profile_http *h, const char *url, const char *put_body,
                         size_t put_len, const char *sha, response *r)
{
    const char *method = put_body ? "PUT" : "GET";
    char shown[1024];
    redact(url, shown, sizeof shown);
    PP_TRY(check_http(h, url));
    int retries = h->retries >= 0 ? h->retries : 3;
    double wait = h->backoff_s > 0 ? h->backoff_s : 0.5, deadline = pp_now() + deadline_s(h);
    for (int k = 0;; k++) {
        PP_TRY(request_once(h, url, put_body, put_len, sha, deadline - pp_now(), r));
        char why[CURL_ERROR_SIZE + 64];
        int transient = describe(r, why, sizeof why);
        if (r->cc == CURLE_OK && r->http >= 200 && r->http < 300)
            return PP_OK;
        if (!transient || k >= retries)
            return final_error(r, method, shown, k + 1, h->token && *h->token);
        if (pp_now() + wait >= deadline) {
            return PP_ERR(PP_ERR_TIMEOUT, "%s %s: %s; no time left for a retry within the %g s "
                                          "deadline (after %d attempt%s)",
                          method, shown, why, deadline_s(h), k + 1, k ? "s" : "");
        }
        if (h->log) {
            char msg[CURL_ERROR_SIZE + 1200];
            snprintf(msg, sizeof msg, "%s %s: %s; retry %d/%d in %.3g s", method, shown, why, k + 1,
                     retries, wait);
            h->log(h->log_ctx, msg);
        }
        sleep_s(wait);
        wait = wait * 2 > 30 ? 30 : wait * 2;
    }
}

static pp_status url_for(const pp_profile_http *h, const char *key, char **out)
{
    if (!h->url || !*h->url)
        return PP_ERR(PP_ERR_INVALID, "no store URL given (--store URL)");
    if (strncmp(h->url, "http://", 7) != 0 && strncmp(h->url, "https://", 8) != 0)
        return PP_ERR(PP_ERR_INVALID, "store URL \"%.200s\": expected http://... or https://...",
                      h->url);
    size_t n = strlen(h->url) + strlen(key) + 2;
    char *u = malloc(n);
    if (!u)
        return PP_ERR_NOMEM;
    size_t ul = strlen(h->url);
    snprintf(u, n, "%s%s%s", h->url, ul && h->url[ul - 1] == '/' ? "" : "/", key);
    *out = u;
    return PP_OK;
}

static pp_status publish_text(const pp_profile_http *h, const char *text, size_t len,
                              const char *key)
{
    char *url;
    PP_TRY(url_for(h, key, &url));
    char sha[65];
    pp_sha256_hex(text, len, sha);
    response r = {0};
    pp_status st = request(h, url, text, len, sha, &r);
    free(r.body.data);
    free(url);
    PP_TRY(st);
    return PP_OK;
}

pp_status pp_profile_publish(const pp_profile_http *h, const char *path, char **key_out)
{
    /* One read: the bytes validated are the bytes sent. */
    char *text = NULL, key[256];
    size_t len;
    pp_profile *p = NULL;
    PP_TRY(pp_profile_read_text(path, &text, &len));
    pp_status st = pp_profile_parse(text, len, path, &p);
    if (st == PP_OK)
        st = pp_profile_store_key(p->cluster.fingerprint, p->model.name, key, sizeof key);
    pp_profile_destroy(p);
    if (st == PP_OK)
        st = publish_text(h, text, len, key);
    free(text);
    PP_TRY(st);
    if (key_out && !(*key_out = pp_strdup(key)))
        return PP_ERR_NOMEM;
    return PP_OK;
}

/* Checksum, schema and identity of a fetched body. */
static pp_status verify(const response *r, const char *shown, const char *fingerprint,
                        const char *model)
{
    if (!r->has_checksum)
        return PP_ERR(PP_ERR_IO,
                      "GET %s: the store sent no X-Checksum-Sha256 header: the "
                      "profile cannot be verified",
                      shown);
    char sha[65];
    pp_sha256_hex(r->body.data ? r->body.data : "", r->body.len, sha);
    if (strcmp(sha, r->checksum) != 0)
        return PP_ERR(PP_ERR_IO,
                      "GET %s: checksum mismatch: the %zu bytes received hash to sha256 %s, not "
                      "to the store's X-Checksum-Sha256%s (corrupted or truncated)",
                      shown, r->body.len, sha,
                      r->checksum[0] == '(' ? " header, which is malformed" : "");
    /* not JSON: said without a word of the body (a store that echoes the request would have
     * its headers, the token among them, printed) */
    json_error_t e;
    json_t *doc = json_loadb(r->body.data ? r->body.data : "", r->body.len, 0, &e);
    if (!doc)
        return PP_ERR(PP_ERR_PARSE,
                      "GET %s: the store's answer (%zu bytes) is not JSON (line %d, column %d): "
                      "not a profile",
                      shown, r->body.len, e.line, e.column);
    json_decref(doc);
    pp_profile *p;
    PP_TRY(pp_profile_parse(r->body.data ? r->body.data : "", r->body.len, shown, &p));
    int same_cluster = !strcmp(p->cluster.fingerprint, fingerprint);
    int same_model = !strcmp(p->model.name, model);
    pp_profile_destroy(p);
    /* what the store sent is not echoed (it could carry terminal escapes, or the token) */
    if (!same_cluster || !same_model)
        return PP_ERR(PP_ERR_PARSE,
                      "GET %s: the store returned the profile of another %s, expected "
                      "cluster %s, model %s",
                      shown, !same_cluster && !same_model ? "cluster and model"
                             : !same_cluster             ? "cluster"
                                                         : "model",
                      fingerprint, model);
    return PP_OK;
}

pp_status pp_profile_fetch(const pp_profile_http *h, const char *fingerprint, const char *model,
                           const char *dest)
{
    char key[256], *url, shown[1024];
    PP_TRY(pp_profile_store_key(fingerprint, model, key, sizeof key));
    PP_TRY(url_for(h, key, &url));
    redact(url, shown, sizeof shown);
    response r = {0};
    pp_status st = request(h, url, NULL, 0, NULL, &r);
    free(url);
    if (st == PP_OK)
        st = verify(&r, shown, fingerprint, model);
    if (st == PP_OK)
        st = pp_profile_store_mkdirs(dest);
    if (st == PP_OK)
        st = pp_file_write_atomic(dest, r.body.data, r.body.len);
    free(r.body.data);
    PP_TRY(st);
    return PP_OK;
}
