/* cpu_transfer.c — the time to move a buffer from one CPU-backend rank (a thread on its own
 * core) to another, done the way the in-process transport does it (runtime/transport_thread.c):
 * the sender copies into a freshly allocated message buffer and hands it over under a mutex and
 * condition variable; the receiver copies it out and the buffer is freed. Measured as a
 * ping-pong between two threads pinned to two cores (one-way time = round trip / 2), over a size
 * sweep, with an α-β fit per pair: the pairwise matrices and the intra-node class (median over
 * pairs).
 *
 * Not here: the transport itself (probes/ does not depend on runtime/; this mirrors its cost
 * model), MPI (mpi_gather.c).
 */
#define _GNU_SOURCE /* pthread_attr_setaffinity_np, CPU_SET */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_impl.h"

#define MAX_POINTS 32
#define ALL_PAIRS_UP_TO 8 /* cores; above (quick: above 4), only pairs (0, j) are measured */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int turn;    /* 0: main thread holds the token, 1: the peer does */
    long rounds; /* how many replies the peer sends */
    char *a, *b; /* main thread's and peer's own buffers */
    char *msg;   /* the message in flight, allocated by its sender, freed by its receiver */
    size_t bytes;
    int failed; /* an allocation failed: both sides stop */
} pingpong;

/* One direction: copy `from` into a new message, hand it over, wait for the answer. */
static void hand_over(pingpong *p, const char *from, int to_turn)
{
    char *m = malloc(p->bytes ? p->bytes : 1);
    if (m)
        memcpy(m, from, p->bytes);
    pthread_mutex_lock(&p->mu);
    p->msg = m;
    p->failed |= !m;
    p->turn = to_turn;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Waits for the token, copies the message out into `into` and frees it. 0 when failed. */
static int take_over(pingpong *p, char *into, int my_turn)
{
    pthread_mutex_lock(&p->mu);
    while (p->turn != my_turn && !p->failed)
        pthread_cond_wait(&p->cv, &p->mu);
    char *m = p->turn == my_turn ? p->msg : NULL;
    if (m)
        p->msg = NULL;
    int ok = !p->failed;
    pthread_mutex_unlock(&p->mu);
    if (m) {
        memcpy(into, m, p->bytes);
        free(m);
    }
    return ok;
}

static void *peer_main(void *arg)
{
    pingpong *p = arg;
    for (long r = 0; r < p->rounds; r++) {
        if (!take_over(p, p->b, 1))
            break;
        hand_over(p, p->b, 0);
    }
    return NULL;
}

static int round_trip(pingpong *p)
{
    hand_over(p, p->a, 1);
    return take_over(p, p->a, 0);
}

static int pin_self(int cpu, cpu_set_t *saved)
{
    cpu_set_t set;
    if (cpu < 0)
        return 0;
    pthread_getaffinity_np(pthread_self(), sizeof *saved, saved);
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

/* One size between cpu_a (this thread) and cpu_b (the peer); -1: not pinned. */
static pp_status transfer_point(size_t bytes, int samples, int cpu_a, int cpu_b, pp_xfer_point *pt)
{
    int iters = (int)((64u << 20) / (bytes ? bytes : 1));
    iters = iters < 4 ? 4 : iters > 200 ? 200 : iters;
    const int warm = 2;
    pingpong p = {.rounds = (long)warm + (long)samples * iters, .bytes = bytes};
    p.a = pp_calloc(bytes ? bytes : 1, 1);
    p.b = pp_calloc(bytes ? bytes : 1, 1);
    if (!p.a || !p.b || pthread_mutex_init(&p.mu, NULL) || pthread_cond_init(&p.cv, NULL)) {
        free(p.a);
        free(p.b);
        return PP_ERR(PP_ERR_NOMEM, "thread transfer probe: cannot set up %zu-byte buffers", bytes);
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (cpu_b >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu_b, &set);
        pthread_attr_setaffinity_np(&attr, sizeof set, &set);
    }
    cpu_set_t saved;
    int pinned = pin_self(cpu_a, &saved);
    pthread_t th;
    pp_status st = PP_OK;
    if (pthread_create(&th, &attr, peer_main, &p) != 0) {
        st = PP_ERR(PP_ERR_DEVICE, "thread transfer probe: cannot start a thread on CPU %d", cpu_b);
    } else {
        double t[32];
        int ok = 1;
        for (int i = 0; i < warm && ok; i++)
            ok = round_trip(&p);
        for (int s = 0; s < samples && ok; s++) {
            double t0 = pp_now();
            for (int i = 0; i < iters && ok; i++)
                ok = round_trip(&p);
            t[s] = (pp_now() - t0) / (2.0 * iters);
        }
        if (!ok) /* the peer saw `failed` too and has left */
            st = PP_ERR(PP_ERR_NOMEM,
                        "thread transfer probe: cannot allocate a %zu-byte "
                        "message",
                        bytes);
        pthread_join(th, NULL);
        free(p.msg);
        if (ok)
            *pt = (pp_xfer_point){.bytes = (double)bytes, .seconds = pp_measure_of(t, samples)};
    }
    if (pinned)
        pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
    pthread_attr_destroy(&attr);
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    free(p.a);
    free(p.b);
    return st;
}

/* nccl-tests style sweep by a constant factor: 8 B .. 16 MiB (quick, x8), 8 B .. 64 MiB (x4). */
static pp_status sweep(const pp_probe_opts *o, int cpu_a, int cpu_b, pp_xfer_point *pts, int *n)
{
    size_t hi = (size_t)(o->quick ? 16 : 64) << 20, factor = o->quick ? 8 : 4;
    int samples = o->quick ? 5 : 9;
    *n = 0;
    for (size_t b = 8; b <= hi && *n < MAX_POINTS; b *= factor) {
        PP_TRY(transfer_point(b, samples, cpu_a, cpu_b, &pts[*n]));
        (*n)++;
    }
    return PP_OK;
}

pp_status pp_cpu_thread_links(const pp_probe_opts *o, const int *cpus, int n, pp_cluster *c,
                              int first)
{
    int nd = c->n_devices, k = 0, np = 0, all = n <= (o->quick ? 4 : ALL_PAIRS_UP_TO);
    double *al = pp_calloc((size_t)n * (size_t)n + 1, sizeof *al);
    double *be = pp_calloc((size_t)n * (size_t)n + 1, sizeof *be);
    c->pair_bw_Bps = pp_calloc((size_t)nd * (size_t)nd, sizeof(double));
    c->pair_alpha_s = pp_calloc((size_t)nd * (size_t)nd, sizeof(double));
    pp_link *l = &c->links[PP_LINK_INTRA];
    pp_status st = al && be && c->pair_bw_Bps && c->pair_alpha_s ? PP_OK : PP_ERR_NOMEM;
    pp_xfer_point pts[MAX_POINTS];
    for (int a = 0; a < n && st == PP_OK; a++)
        for (int b = a + 1; b < n && st == PP_OK && (all || a == 0); b++) {
            st = sweep(o, cpus[a], cpus[b], pts, &np);
            if (st == PP_OK)
                st = pp_fit_alpha_beta(pts, np, &al[k], &be[k]);
            if (st == PP_OK && k == 0) {
                l->points = pp_xfer_copy(pts, np);
                l->n_points = np;
                st = l->points ? PP_OK : PP_ERR_NOMEM;
            }
            if (st != PP_OK)
                break;
            /* a ping-pong times both directions alike: the matrix is symmetric */
            int i = first + a, j = first + b;
            c->pair_bw_Bps[i * nd + j] = c->pair_bw_Bps[j * nd + i] = be[k];
            c->pair_alpha_s[i * nd + j] = c->pair_alpha_s[j * nd + i] = al[k];
            pp_probe_say(o,
                         "cpu %d <-> %d: thread transfer alpha %.2f us, beta %.2f GB/s "
                         "(%zu B .. %.0f MiB)",
                         cpus[a], cpus[b], al[k] * 1e6, be[k] / 1e9, (size_t)8,
                         pts[np - 1].bytes / (1 << 20));
            k++;
        }
    if (st == PP_OK && k > 0) {
        l->present = 1;
        l->source = PP_SRC_PROBED;
        l->alpha_s = pp_measure_of(al, k).median;
        l->beta_Bps = pp_measure_of(be, k).median;
        snprintf(l->method, sizeof l->method,
                 "thread-copy as the in-process transport (median "
                 "of %d pinned core pair%s)",
                 k, k == 1 ? "" : "s");
        snprintf(c->pair_method, sizeof c->pair_method, "thread-copy, pinned ping-pong%s",
                 all ? "" : " (pairs with core 0 only; 0 = not measured)");
    }
    free(al);
    free(be);
    return st == PP_OK ? PP_OK : pp_err_trace(st, __FILE__, __LINE__);
}
