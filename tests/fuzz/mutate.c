/* mutate.c — the bounded mutation fuzz pass of CI (ctest label "fuzz").
 *
 * For every format of fuzz_targets.c: a fixed number of mutants of its seeds (fuzz_seeds.c),
 * each made from its own random stream derived from (seed, format, index), so any mutant can be
 * made again from those three numbers; each is written to a file and run in this process against
 * the reader. A finding is: a status the program would not exit 0 or 2 on (pp_fuzz_status_ok), a
 * sanitizer report (ASan, UBSan, LeakSanitizer), a crash (signal), a hang (an input running past
 * --timeout seconds) or an allocation past the limit (ASan's max_allocation_size_mb and
 * hard_rss_limit_mb in the sanitizer build, RLIMIT_AS in a plain one). Each finding prints one
 * line naming the format, seed, index and the mutant's file, kept under --artifacts; replay it
 * with `pp_fuzz_mutate --replay FORMAT FILE`. A --time-cap stops a slow machine early (the
 * count reached is printed) rather than failing it; it is shared out over the formats, so each
 * runs mutants within its share. Exit 0: no finding; 1: findings; 2: usage.
 *
 * It does not shrink inputs or learn coverage: scripts/fuzz-libfuzzer.sh is the long-running
 * coverage-guided fuzzer for developers.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_seeds.h"
#include "fuzz_targets.h"

#if defined(__SANITIZE_ADDRESS__)
#define PP_FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PP_FUZZ_ASAN 1
#endif
#endif

#ifdef PP_FUZZ_ASAN
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
/* Allocations past these limits abort with a report (which names the mutant, below) instead of
 * returning NULL: a few bytes of input must never ask for hundreds of megabytes. The
 * environment's ASAN_OPTIONS add to these (and win where they set the same flag). */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=0:max_allocation_size_mb=512:hard_rss_limit_mb=3072:"
           "malloc_context_size=20";
}
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
    return "halt_on_error=1:print_stacktrace=1";
}
#endif

#define MAX_MUTANT (1u << 20) /* bytes; a mutant that would grow past it is cut there */

typedef struct {
    uint64_t seed;
    int count;       /* mutants per format */
    double time_cap; /* seconds for the whole pass */
    int timeout;     /* seconds per input */
    const char *artifacts, *work, *only, *pprun;
    int leak_every;  /* run LeakSanitizer after this many mutants (sanitizer build) */
} fuzz_opts;

/* ---- the current input, for the death callback and the signal handlers ---------------------- */
static char cur_path[1024], cur_artifact[1100], cur_line[3400];
static volatile sig_atomic_t reported;
static int leak_found; /* leak checks stop after the first: leaked blocks stay reported */

static void report_current(const char *what)
{
    if (reported)
        return;
    reported = 1;
    if (cur_path[0] && rename(cur_path, cur_artifact) == 0) {
        /* kept */
    }
    ssize_t w = write(2, "fuzz FINDING: ", 14);
    w = write(2, what, strlen(what));
    w = write(2, cur_line, strlen(cur_line));
    (void)w;
}

#ifdef PP_FUZZ_ASAN
static void on_sanitizer_death(void)
{
    report_current("sanitizer report above; ");
}
#endif

static void on_signal(int sig)
{
    report_current(sig == SIGALRM ? "hang (ran past the per-input timeout); "
                                  : "crash (fatal signal); ");
    if (sig == SIGALRM)
        _exit(1);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_handlers(void)
{
#ifdef PP_FUZZ_ASAN
    /* ASan reports memory faults itself (with the stack) and then calls on_sanitizer_death */
    int sigs[] = {SIGALRM, SIGABRT};
#else
    int sigs[] = {SIGALRM, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#endif
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa = {.sa_handler = on_signal};
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
#ifdef PP_FUZZ_ASAN
    __sanitizer_set_death_callback(on_sanitizer_death);
#else
    /* no allocator limit without ASan: the address space is the limit */
    struct rlimit rl = {.rlim_cur = (rlim_t)4 << 30, .rlim_max = (rlim_t)4 << 30};
    setrlimit(RLIMIT_AS, &rl);
#endif
}

/* ---- the mutator ---------------------------------------------------------------------------- */
/* splitmix64 */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t below(uint64_t *s, size_t n)
{
    return n ? (size_t)(next(s) % n) : 0;
}

/* Half the positions fall in the first kilobyte, a quarter in the first 64 bytes: headers,
 * counts and sizes live there. */
static size_t pos_in(uint64_t *s, size_t len)
{
    size_t r = (size_t)(next(s) & 3);
    size_t lim = r == 0 ? 64 : r == 1 ? 1024 : len;
    return below(s, len < lim ? len : lim);
}

typedef struct {
    char *p;
    size_t len, cap;
} buf;

static void replace(buf *b, size_t at, size_t n_del, const char *ins, size_t n_ins)
{
    if (at > b->len)
        at = b->len;
    if (n_del > b->len - at)
        n_del = b->len - at;
    if (b->len - n_del + n_ins > MAX_MUTANT)
        n_ins = MAX_MUTANT - (b->len - n_del);
    size_t len = b->len - n_del + n_ins;
    if (len + 1 > b->cap) { /* geometric: the nesting mutator appends thousands of times */
        b->cap = len + 1 > 2 * b->cap ? len + 1 : 2 * b->cap;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            abort();
    }
    memmove(b->p + at + n_ins, b->p + at + n_del, b->len - at - n_del);
    memcpy(b->p + at, ins, n_ins);
    b->len = len;
}

static const char *const edge_numbers[] = {
    "0", "-1", "1", "-0", "2147483647", "2147483648", "-2147483649", "4294967295", "4294967296",
    "65536", "16777216", "536870912", "1073741824", "9223372036854775807", "9223372036854775808",
    "18446744073709551616", "-9223372036854775809", "1e308", "-1e308", "1e309", "1e-320", "4.9e-324",
    "0.5", "1.5", "nan", "inf", "-inf", "NaN", "1e19", "0x10", "00", "1e2", "3.0"};

/* The digit run at or after `at` (or a fresh position when there is none). */
static size_t number_at(const buf *b, size_t at, size_t *n)
{
    size_t i = at;
    while (i < b->len && !(b->p[i] >= '0' && b->p[i] <= '9'))
        i++;
    if (i == b->len)
        i = at;
    size_t j = i;
    while (j < b->len && ((b->p[j] >= '0' && b->p[j] <= '9') || b->p[j] == '.' || b->p[j] == 'e' ||
                          b->p[j] == '-'))
        j++;
    *n = j - i;
    return i;
}

static void mutate_once(buf *b, const pp_fuzz_seeds *seeds, uint64_t *s)
{
    size_t at = pos_in(s, b->len);
    char tmp[8192];
    switch (below(s, 12)) {
    case 11: { /* a binary field (checkpoints): an edge value of 1, 2, 4 or 8 bytes */
        static const uint64_t v[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fffffff,
                                     0x80000000, 0xffffffff, 0x7fffffffffffffffull, ~0ull};
        uint64_t x = v[below(s, sizeof v / sizeof v[0])];
        size_t n = (size_t)1 << below(s, 4);
        if (at + n <= b->len)
            memcpy(b->p + at, &x, n);
        break;
    }
    case 0: /* flip a bit */
        if (b->len)
            b->p[at < b->len ? at : b->len - 1] ^= (char)(1u << below(s, 8));
        break;
    case 1: { /* set a byte to one that matters to a parser */
        static const char bytes[] = "\0\xff\"{}[],:\n -.0123456789e\\#%xX";
        char c = (next(s) & 3) ? bytes[below(s, sizeof bytes - 1)] : (char)next(s);
        replace(b, at, 1, &c, 1);
        break;
    }
    case 2: /* delete a range */
        replace(b, at, 1 + below(s, 64), "", 0);
        break;
    case 3: { /* copy a range elsewhere */
        size_t from = pos_in(s, b->len), n = 1 + below(s, 256);
        if (from + n > b->len)
            n = b->len - from;
        if (n > sizeof tmp)
            n = sizeof tmp;
        memcpy(tmp, b->p + from, n);
        replace(b, pos_in(s, b->len), 0, tmp, n);
        break;
    }
    case 4: /* truncate, often to a few bytes (the shortest inputs a reader must refuse) */
        b->len = (next(s) & 1) && b->len > 32 ? below(s, 32) : at;
        break;
    case 5: { /* splice: this input's head, another seed's tail */
        int k = (int)below(s, (size_t)seeds->n);
        size_t from = below(s, seeds->len[k]);
        replace(b, at, b->len - at, seeds->data[k] + from, seeds->len[k] - from);
        break;
    }
    case 6:
    case 7: { /* an edge value in place of a number */
        size_t n, i = number_at(b, at, &n);
        const char *v = edge_numbers[below(s, sizeof edge_numbers / sizeof edge_numbers[0])];
        replace(b, i, n, v, strlen(v));
        break;
    }
    case 8: { /* a huge number */
        size_t n, i = number_at(b, at, &n), digits = 20 + below(s, 2000);
        if (digits > sizeof tmp)
            digits = sizeof tmp;
        for (size_t d = 0; d < digits; d++)
            tmp[d] = (char)('1' + below(s, 9));
        replace(b, i, n, tmp, digits);
        break;
    }
    case 9: { /* deep nesting */
        static const char *const opens[] = {"[", "{\"a\":", "<a>", "(", "{\"ops\":["};
        const char *o = opens[below(s, sizeof opens / sizeof opens[0])];
        size_t lo = strlen(o), reps = 100 + below(s, 20000);
        buf nest = {0};
        for (size_t r = 0; r < reps; r++)
            replace(&nest, nest.len, 0, o, lo);
        replace(b, at, 0, nest.p, nest.len);
        free(nest.p);
        break;
    }
    default: { /* repeat a line many times */
        size_t i = at;
        while (i > 0 && b->p[i - 1] != '\n')
            i--;
        size_t j = at;
        while (j < b->len && b->p[j] != '\n')
            j++;
        size_t n = j < b->len ? j - i + 1 : j - i, reps = 2 + below(s, 500);
        if (n == 0 || n > sizeof tmp)
            break;
        memcpy(tmp, b->p + i, n);
        for (size_t r = 0; r < reps && b->len < MAX_MUTANT; r++)
            replace(b, j, 0, tmp, n);
        break;
    }
    }
}

/* Mutant `index` of a format: one to four mutations of one of its seeds. */
static void make_mutant(const pp_fuzz_target *t, const pp_fuzz_seeds *seeds, uint64_t seed,
                        int index, buf *b)
{
    uint64_t s = pp_fnv1a_str(pp_fnv1a(PP_FNV1A_BASIS, &seed, sizeof seed), t->name);
    s = pp_fnv1a(s, &index, sizeof index);
    int k = (int)below(&s, (size_t)seeds->n);
    b->len = 0;
    replace(b, 0, 0, seeds->data[k], seeds->len[k]);
    int n = 1 + (int)below(&s, 4);
    for (int i = 0; i < n; i++)
        mutate_once(b, seeds, &s);
    if (t->fixup && (next(&s) % 4) != 0)
        t->fixup(b->p, b->len);
    b->p[b->len] = '\0';
}

/* ---- running ------------------------------------------------------------------------------- */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void set_timer(int seconds)
{
    struct itimerval it = {.it_value = {.tv_sec = seconds}};
    setitimer(ITIMER_REAL, &it, NULL);
}

/* Runs one input already written to cur_path. Returns 1 when it is a finding. */
static int run_one(const pp_fuzz_target *t, const char *data, size_t len, int timeout)
{
    reported = 0;
    pp_err_clear();
    set_timer(timeout);
    pp_status st = t->run(data, len, cur_path);
    set_timer(0);
    if (pp_fuzz_status_ok(t, st))
        return 0;
    char what[1400];
    snprintf(what, sizeof what, "status %s (the program would exit 1), message \"%.1000s\"; ",
             pp_status_name(st), pp_err_text());
    report_current(what);
    return 1;
}

#ifdef PP_FUZZ_ASAN
static int leaks_now(void)
{
    return __lsan_do_recoverable_leak_check() != 0;
}
#else
static int leaks_now(void)
{
    return 0;
}
#endif

static void describe(const fuzz_opts *o, const pp_fuzz_target *t, int i)
{
    snprintf(cur_path, sizeof cur_path, "%s/%s.input%s", o->work, t->name, t->ext);
    snprintf(cur_artifact, sizeof cur_artifact, "%s/%s-seed%llu-%d%s", o->artifacts, t->name,
             (unsigned long long)o->seed, i, t->ext);
    snprintf(cur_line, sizeof cur_line,
             "format %s, seed %llu, mutant %d, input kept as %s (replay: pp_fuzz_mutate "
             "--replay %s %s)\n",
             t->name, (unsigned long long)o->seed, i, cur_artifact, t->name, cur_artifact);
}

/* Mutants [from, to) of one format. With check_leaks, only a leak check after each (a second
 * run of a range whose batch leaked, to name the input). */
static int run_range(const fuzz_opts *o, const pp_fuzz_target *t, const pp_fuzz_seeds *seeds,
                     int from, int to, int check_leaks, buf *b, int *stopped_at, double t_end)
{
    int findings = 0;
    for (int i = from; i < to; i++) {
        if (now() > t_end) {
            *stopped_at = i;
            return findings;
        }
        make_mutant(t, seeds, o->seed, i, b);
        describe(o, t, i);
        if (pp_fuzz_write_file(cur_path, b->p, b->len) != 0) {
            fprintf(stderr, "fuzz: cannot write %s: %s\n", cur_path, strerror(errno));
            exit(1);
        }
        if (!check_leaks) {
            findings += run_one(t, b->p, b->len, o->timeout);
            continue;
        }
        /* the leak hunt: the statuses were judged on the first run */
        set_timer(o->timeout);
        t->run(b->p, b->len, cur_path);
        set_timer(0);
        reported = 0;
        if (leaks_now()) {
            report_current("LeakSanitizer report above (memory leaked on this input); ");
            /* what leaked stays leaked: every later check would report it again */
            leak_found = 1;
            return findings + 1;
        }
    }
    return findings;
}

static int fuzz_format(const fuzz_opts *o, const pp_fuzz_target *t, double t_end)
{
    pp_fuzz_seeds seeds;
    pp_fuzz_seeds_load(t->name, o->pprun, o->work, &seeds);
    if (seeds.n == 0) {
        fprintf(stderr, "fuzz %s: no seed could be made (is %s built?)\n", t->name,
                o->pprun ? o->pprun : "pprun");
        return 1;
    }
    double t0 = now();
    buf b = {0};
    int findings = 0, stopped = -1;
    leaks_now(); /* whatever was left before the first mutant is not the mutants' */
    int count = o->count / t->cost > 0 ? o->count / t->cost : 1;
    for (int i = 0; i < count && stopped < 0; i += o->leak_every) {
        int to = i + o->leak_every < count ? i + o->leak_every : count;
        findings += run_range(o, t, &seeds, i, to, 0, &b, &stopped, t_end);
        if (!leak_found && leaks_now()) { /* which one: again, one by one */
            findings += run_range(o, t, &seeds, i, to, 1, &b, &stopped, t_end + 60);
            if (!leak_found) { /* leaked only in the batch: name the batch */
                fprintf(stderr, "fuzz FINDING: LeakSanitizer report above; format %s, seed %llu, "
                                "one of mutants %d..%d (not again one by one)\n",
                        t->name, (unsigned long long)o->seed, i, to - 1);
                leak_found = 1;
                findings++;
            }
        }
    }
    int done = stopped < 0 ? count : stopped;
    printf("fuzz %-10s %5d mutants of %d seed%s, %d finding%s, %.1f s%s\n", t->name, done,
           seeds.n, seeds.n == 1 ? "" : "s", findings, findings == 1 ? "" : "s", now() - t0,
           stopped >= 0 ? " (time cap reached)" : "");
    fflush(stdout);
    remove(cur_path);
    free(b.p);
    pp_fuzz_seeds_fini(&seeds);
    return findings;
}

/* Writes every format's seeds as DIR/<format>/seed-<k><ext> (the libFuzzer corpora). */
static int write_seeds(const fuzz_opts *o, const char *dir)
{
    mkdir(dir, 0755);
    for (const pp_fuzz_target *t = pp_fuzz_targets; t->name; t++) {
        pp_fuzz_seeds seeds;
        pp_fuzz_seeds_load(t->name, o->pprun, o->work, &seeds);
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, t->name);
        mkdir(path, 0755);
        for (int k = 0; k < seeds.n; k++) {
            snprintf(path, sizeof path, "%s/%s/seed-%d%s", dir, t->name, k, t->ext);
            if (pp_fuzz_write_file(path, seeds.data[k], seeds.len[k]) != 0) {
                fprintf(stderr, "fuzz: cannot write %s\n", path);
                return 1;
            }
        }
        pp_fuzz_seeds_fini(&seeds);
    }
    return 0;
}

static int replay(const char *format, const char *file)
{
    const pp_fuzz_target *t = pp_fuzz_target_find(format);
    char *data;
    size_t len;
    if (!t || pp_file_read(file, &data, &len) != PP_OK) {
        fprintf(stderr, "fuzz --replay: unknown format \"%s\" or unreadable file %s\n", format,
                file);
        return 2;
    }
    snprintf(cur_path, sizeof cur_path, "%s", file);
    snprintf(cur_artifact, sizeof cur_artifact, "%s", file);
    snprintf(cur_line, sizeof cur_line, "format %s, file %s\n", format, file);
    install_handlers();
    pp_err_clear();
    pp_status st = t->run(data, len, file);
    printf("%s: status %s: %s\n", file, pp_status_name(st), pp_err_text());
    free(data);
    return pp_fuzz_status_ok(t, st) ? 0 : 1;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: pp_fuzz_mutate [--seed S] [--count N] [--time-cap SECONDS] [--timeout SECONDS]\n"
            "                      [--format NAME] [--artifacts DIR] [--work DIR] [--pprun PATH]\n"
            "                      [--leak-every N]\n"
            "       pp_fuzz_mutate --write-seeds DIR [--pprun PATH] [--work DIR]\n"
            "       pp_fuzz_mutate --replay FORMAT FILE\n");
    return 2;
}

int main(int argc, char **argv)
{
    fuzz_opts o = {.seed = 1, .count = 300, .time_cap = 150, .timeout = 20, .artifacts = ".",
                   .work = ".", .leak_every = 64};
    const char *seeds_dir = NULL;
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--replay") && i + 2 < argc)
            return replay(argv[i + 1], argv[i + 2]);
        if (!v)
            return usage();
        if (!strcmp(a, "--seed"))
            o.seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--count"))
            o.count = atoi(v);
        else if (!strcmp(a, "--time-cap"))
            o.time_cap = atof(v);
        else if (!strcmp(a, "--timeout"))
            o.timeout = atoi(v);
        else if (!strcmp(a, "--format"))
            o.only = v;
        else if (!strcmp(a, "--artifacts"))
            o.artifacts = v;
        else if (!strcmp(a, "--work"))
            o.work = v;
        else if (!strcmp(a, "--leak-every"))
            o.leak_every = atoi(v);
        else if (!strcmp(a, "--pprun"))
            o.pprun = v;
        else if (!strcmp(a, "--write-seeds"))
            seeds_dir = v;
        else
            return usage();
    }
    if (o.count < 1 || o.timeout < 1 || o.leak_every < 1 || !(o.time_cap > 0))
        return usage();
    if (seeds_dir)
        return write_seeds(&o, seeds_dir);
    if (o.only && !pp_fuzz_target_find(o.only)) {
        fprintf(stderr, "pp_fuzz_mutate: unknown --format \"%s\"\n", o.only);
        return 2;
    }
    mkdir(o.artifacts, 0755);
    mkdir(o.work, 0755);
    install_handlers();
    /* the cap shared out: each format may take what is left over the formats left, so a slow
     * format early in the table cannot leave the later ones no mutant at all (a format done
     * early hands its unused share on) */
    double t_end = now() + o.time_cap;
    int findings = 0, left = 0;
    for (const pp_fuzz_target *t = pp_fuzz_targets; t->name; t++)
        left += !o.only || !strcmp(o.only, t->name);
    for (const pp_fuzz_target *t = pp_fuzz_targets; t->name; t++)
        if (!o.only || !strcmp(o.only, t->name)) {
            double t0 = now();
            findings += fuzz_format(&o, t, t0 + (t_end - t0) / left--);
        }
    /* LeakSanitizer's check at exit is no mutant's */
    cur_path[0] = '\0';
    snprintf(cur_line, sizeof cur_line, "at exit: memory still allocated after the pass\n");
    reported = 0;
    printf("fuzz: seed %llu, %d finding%s%s\n", (unsigned long long)o.seed, findings,
           findings == 1 ? "" : "s", findings ? " (inputs kept under the artifacts folder)" : "");
    return findings ? 1 : 0;
}
