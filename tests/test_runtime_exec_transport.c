/* test_runtime_exec_transport.c — the in-process transport on its own: buffered sends that
 * never block, tag matching, size checks, all-reduces that sum in group order and do not block
 * on post, the barrier, abort waking blocked ranks, and send buffers counted as PP_MEM_COMM
 * in the sender's backend. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "pp_rt.h"
#include "tp_coll_check.h"

#include "pp_test_ok.h"

Test(runtime_transport, sends_never_block_and_match_by_tag)
{
    pp_transport *t;
    OK(pp_transport_thread_create(2, NULL, &t));
    cr_assert_str_eq(pp_transport_name(t), "thread");
    /* One thread plays both ranks: this only works if send returns before any receive. */
    for (int m = 0; m < 3; m++) {
        float v[4] = {(float)m, (float)m + 0.5f, -1, 2};
        OK(pp_transport_send(t, 0, 1, pp_transport_tag(0, 1, m, 0), v, sizeof v));
    }
    for (int m = 2; m >= 0; m--) { /* out of order */
        float v[4];
        OK(pp_transport_recv(t, 1, 0, pp_transport_tag(0, 1, m, 0), v, sizeof v));
        cr_assert_eq(v[0], (float)m);
        cr_assert_eq(v[1], (float)m + 0.5f);
    }
    OK(pp_transport_flush(t, 0));
    pp_transport_destroy(t);
}

Test(runtime_transport, tags_separate_pipes_stages_directions)
{
    uint64_t a = pp_transport_tag(0, 3, 5, 0);
    cr_assert_neq(a, pp_transport_tag(1, 3, 5, 0));
    cr_assert_neq(a, pp_transport_tag(0, 3, 5, 1));
    cr_assert_neq(a, pp_transport_tag(0, 4, 5, 0));
    cr_assert_neq(a, pp_transport_tag(0, 3, 6, 0));
}

Test(runtime_transport, size_mismatch_and_bad_ranks_are_errors)
{
    pp_transport *t;
    OK(pp_transport_thread_create(2, NULL, &t));
    char buf[16] = {0};
    OK(pp_transport_send(t, 0, 1, 7, buf, 8));
    cr_assert_eq(pp_transport_recv(t, 1, 0, 7, buf, 16), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "has 8 bytes, the receive expects 16"), "%s", pp_err_text());
    cr_assert_eq(pp_transport_send(t, 0, 2, 7, buf, 8), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "rank 2 is outside 0..1"), "%s", pp_err_text());
    int bad_order[2] = {1, 0};
    float x = 1;
    cr_assert_eq(pp_transport_allreduce_sum(t, 0, bad_order, 2, 1, &x, 1), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "must ascend"), "%s", pp_err_text());
    int other[1] = {1};
    cr_assert_eq(pp_transport_allreduce_sum(t, 0, other, 1, 1, &x, 1), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "not in its own group"), "%s", pp_err_text());
    OK(pp_transport_flush(t, 0));
    pp_transport_destroy(t);
}

Test(runtime_transport, iallreduce_posts_without_blocking_and_sums_in_group_order)
{
    pp_transport *t;
    OK(pp_transport_thread_create(4, NULL, &t));
    enum { N = 3000 }; /* more than one block of the summation */
    static float data[4][N];
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < N; i++)
            data[r][i] = (r == 0 && i % 2) ? 1e8f : (float)(r + 1) * 0.25f + (float)i;
    int group[4] = {0, 1, 2, 3};
    pp_transport_req *req[4];
    /* One thread posts for all four ranks: posting must not wait for the others. */
    for (int r = 0; r < 4; r++)
        OK(pp_transport_iallreduce_sum(t, r, group, 4, 42, data[r], N, &req[r]));
    for (int r = 3; r >= 0; r--)
        OK(pp_transport_wait(t, r, req[r]));
    for (int i = 0; i < N; i++) {
        /* group order: ((d0 + d1) + d2) + d3, in float */
        float d0 = (i % 2) ? 1e8f : 0.25f + (float)i;
        float want = ((d0 + (0.5f + (float)i)) + (0.75f + (float)i)) + (1.0f + (float)i);
        for (int r = 0; r < 4; r++)
            cr_assert_eq(data[r][i], want, "rank %d element %d: %.9g, expected %.9g", r, i,
                         (double)data[r][i], (double)want);
    }
    /* The same tag and group again: a fresh collective, not the finished one. */
    float one[2] = {1, 1};
    int pair[2] = {1, 3};
    pp_transport_req *q1, *q3;
    OK(pp_transport_iallreduce_sum(t, 1, pair, 2, 42, &one[0], 1, &q1));
    OK(pp_transport_iallreduce_sum(t, 3, pair, 2, 42, &one[1], 1, &q3));
    OK(pp_transport_wait(t, 1, q1));
    OK(pp_transport_wait(t, 3, q3));
    cr_assert_eq(one[0], 2.0f);
    cr_assert_eq(one[1], 2.0f);
    pp_transport_destroy(t);
}

typedef struct {
    pp_transport *t;
    int rank, rounds;
    pp_status st;
    char err[256];
} pp_arg;

static void *ping_pong(void *p)
{
    pp_arg *a = p;
    int peer = 1 - a->rank;
    double v = 0;
    for (int i = 0; i < a->rounds && a->st == PP_OK; i++) {
        if ((i % 2) == a->rank) {
            v += 1;
            a->st = pp_transport_send(a->t, a->rank, peer, (uint64_t)i, &v, sizeof v);
        } else {
            a->st = pp_transport_recv(a->t, a->rank, peer, (uint64_t)i, &v, sizeof v);
        }
    }
    if (a->st == PP_OK)
        a->st = pp_transport_barrier(a->t, a->rank);
    if (a->st == PP_OK)
        a->st = pp_transport_flush(a->t, a->rank);
    if (a->st != PP_OK)
        snprintf(a->err, sizeof a->err, "%s", pp_err_msg());
    return NULL;
}

Test(runtime_transport, ping_pong_between_threads_with_backends_counting_comm)
{
    pp_backend *be[2];
    OK(pp_backend_cpu_create(&be[0]));
    OK(pp_backend_cpu_create(&be[1]));
    pp_transport *t;
    OK(pp_transport_thread_create(2, be, &t));
    pp_arg a[2] = {{t, 0, 1000, PP_OK, ""}, {t, 1, 1000, PP_OK, ""}};
    pthread_t th[2];
    for (int r = 0; r < 2; r++)
        cr_assert_eq(pthread_create(&th[r], NULL, ping_pong, &a[r]), 0);
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(a[r].st, PP_OK, "rank %d: %s", r, a[r].err);
        pp_mem_stats m;
        pp_backend_mem_stats(be[r], &m);
        /* each rank sent 500 doubles, one at a time, each received before the next is sent */
        cr_assert_eq(m.peak[PP_MEM_COMM], sizeof(double), "rank %d comm peak %zu", r,
                     m.peak[PP_MEM_COMM]);
        cr_assert_eq(m.current[PP_MEM_COMM], 0, "rank %d still holds %zu comm bytes", r,
                     m.current[PP_MEM_COMM]);
    }
    pp_transport_destroy(t);
    pp_backend_destroy(be[0]);
    pp_backend_destroy(be[1]);
}

Test(runtime_transport, buffered_messages_count_until_received)
{
    pp_backend *be[2];
    OK(pp_backend_cpu_create(&be[0]));
    OK(pp_backend_cpu_create(&be[1]));
    pp_transport *t;
    OK(pp_transport_thread_create(2, be, &t));
    float v[100] = {0};
    for (int m = 0; m < 5; m++)
        OK(pp_transport_send(t, 0, 1, (uint64_t)m, v, sizeof v));
    pp_mem_stats s;
    pp_backend_mem_stats(be[0], &s);
    cr_assert_eq(s.current[PP_MEM_COMM], 5 * sizeof v);
    pp_backend_mem_stats(be[1], &s);
    cr_assert_eq(s.current[PP_MEM_COMM], 0, "the receiver's backend pays nothing");
    for (int m = 0; m < 5; m++)
        OK(pp_transport_recv(t, 1, 0, (uint64_t)m, v, sizeof v));
    OK(pp_transport_flush(t, 0));
    pp_backend_mem_stats(be[0], &s);
    cr_assert_eq(s.current[PP_MEM_COMM], 0);
    cr_assert_eq(s.peak[PP_MEM_COMM], 5 * sizeof v);
    /* an unreceived message is returned to its backend when the transport goes */
    OK(pp_transport_send(t, 0, 1, 99, v, sizeof v));
    pp_transport_destroy(t);
    pp_backend_mem_stats(be[0], &s);
    cr_assert_eq(s.current[PP_MEM_COMM], 0);
    pp_backend_destroy(be[0]);
    pp_backend_destroy(be[1]);
}

/* A held send (the context-parallel ring's) is released by release_held only, once received:
 * a later plain send does not free it, nor does it free the plain ones; so its lifetime follows
 * the sender's program order whatever the receiver's timing. */
Test(runtime_transport, held_messages_live_until_released)
{
    pp_backend *be[2];
    OK(pp_backend_cpu_create(&be[0]));
    OK(pp_backend_cpu_create(&be[1]));
    pp_transport *t;
    OK(pp_transport_thread_create(2, be, &t));
    float v[100] = {0}, w[10] = {0};
    OK(pp_transport_send(t, 0, 1, 1, w, sizeof w));
    OK(pp_transport_send_held(t, 0, 1, 2, v, sizeof v));
    OK(pp_transport_recv(t, 1, 0, 1, w, sizeof w));
    OK(pp_transport_recv(t, 1, 0, 2, v, sizeof v));
    OK(pp_transport_send_held(t, 0, 1, 3, v, sizeof v)); /* releases neither */
    pp_mem_stats s;
    pp_backend_mem_stats(be[0], &s);
    cr_assert_eq(s.current[PP_MEM_COMM], 2 * sizeof v + sizeof w);
    OK(pp_transport_send(t, 0, 1, 4, w, sizeof w)); /* the received plain one, not the held */
    pp_backend_mem_stats(be[0], &s);
    cr_assert_eq(s.current[PP_MEM_COMM], 2 * sizeof v + sizeof w);
    OK(pp_transport_recv(t, 1, 0, 3, v, sizeof v));
    OK(pp_transport_release_held(t, 0)); /* both held ones received: freed */
    pp_backend_mem_stats(be[0], &s);
    cr_assert_eq(s.current[PP_MEM_COMM], sizeof w);
    OK(pp_transport_recv(t, 1, 0, 4, w, sizeof w));
    OK(pp_transport_flush(t, 0));
    pp_backend_mem_stats(be[0], &s);
    cr_assert_eq(s.current[PP_MEM_COMM], 0);
    pp_transport_destroy(t);
    pp_backend_destroy(be[0]);
    pp_backend_destroy(be[1]);
}

static void *blocked_recv(void *p)
{
    pp_arg *a = p;
    float v;
    a->st = pp_transport_recv(a->t, a->rank, 0, 5, &v, sizeof v);
    snprintf(a->err, sizeof a->err, "%s", pp_err_text());
    return NULL;
}

Test(runtime_transport, abort_wakes_a_blocked_receive)
{
    pp_transport *t;
    OK(pp_transport_thread_create(2, NULL, &t));
    pp_arg a = {t, 1, 0, PP_OK, ""};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, blocked_recv, &a), 0);
    pp_transport_abort(t); /* whether before or during the wait, the receive must fail */
    pthread_join(th, NULL);
    cr_assert_eq(a.st, PP_ERR_DEVICE);
    cr_assert(strstr(a.err, "aborted"), "%s", a.err);
    float v = 0;
    cr_assert_eq(pp_transport_send(t, 0, 1, 1, &v, sizeof v), PP_ERR_DEVICE);
    pp_transport_destroy(t);
}

/* ---- the tensor-parallel collectives: all-gather and reduce-scatter ---- */
typedef struct {
    pp_transport *t;
    int rank, n_group;
    const int *group;
    float *full, *part; /* [n_group * n], [n] */
    size_t n;
    int in_place;
    pp_status st;
    char err[256];
} tp_arg;

static void *tp_gather_scatter(void *p)
{
    tp_arg *a = p;
    int me = 0;
    while (a->group[me] != a->rank)
        me++;
    float *own = a->in_place ? a->full + (size_t)me * a->n : a->part;
    a->st = pp_transport_allgather(a->t, a->rank, a->group, a->n_group, 7, own, a->full, a->n);
    if (a->st == PP_OK) /* now reduce-scatter what was gathered, scaled by the rank + 1 */
        for (size_t i = 0; i < a->n * (size_t)a->n_group; i++)
            a->full[i] *= (float)(a->rank + 1);
    if (a->st == PP_OK)
        a->st = pp_transport_reduce_scatter_sum(a->t, a->rank, a->group, a->n_group, 8, a->full,
                                                own, a->n);
    if (a->st == PP_OK && a->in_place)
        memcpy(a->part, own, a->n * sizeof *own);
    if (a->st != PP_OK)
        snprintf(a->err, sizeof a->err, "%s", pp_err_msg());
    return NULL;
}

/* Ranks 1 and 3 of 4, then 0..3: each member's part lands in its slice on every member, and a
 * member's reduce-scatter result is the sum of everyone's slice of it in group order. */
static void gather_then_scatter(int in_place)
{
    pp_transport *t;
    OK(pp_transport_thread_create(4, NULL, &t));
    enum { N = 1500 };
    int groups[2][4] = {{1, 3}, {0, 1, 2, 3}}, sizes[2] = {2, 4};
    for (int g = 0; g < 2; g++) {
        int ng = sizes[g];
        static float full[4][4 * N], part[4][N];
        tp_arg a[4];
        pthread_t th[4];
        for (int m = 0; m < ng; m++) {
            int r = groups[g][m];
            for (size_t i = 0; i < N; i++)
                part[m][i] = (r == 1 && i % 2) ? 3e7f : (float)r * 0.1f + (float)i * 1e-3f;
            for (size_t i = 0; i < (size_t)ng * N; i++)
                full[m][i] = -7.0f;
            if (in_place)
                memcpy(full[m] + (size_t)m * N, part[m], sizeof part[m]);
            a[m] = (tp_arg){t, r, ng, groups[g], full[m], part[m], N, in_place, PP_OK, ""};
            cr_assert_eq(pthread_create(&th[m], NULL, tp_gather_scatter, &a[m]), 0);
        }
        for (int m = 0; m < ng; m++)
            pthread_join(th[m], NULL);
        for (int m = 0; m < ng; m++)
            cr_assert_eq(a[m].st, PP_OK, "rank %d: %s", a[m].rank, a[m].err);
        for (int m = 0; m < ng; m++)
            for (size_t i = 0; i < N; i++) {
                /* member j's gathered slice m, scaled by (rank_j + 1), summed over j in order */
                int r = groups[g][m];
                float x = (r == 1 && i % 2) ? 3e7f : (float)r * 0.1f + (float)i * 1e-3f;
                float want = x * (float)(groups[g][0] + 1);
                for (int j = 1; j < ng; j++)
                    want += x * (float)(groups[g][j] + 1);
                cr_assert_eq(part[m][i], want, "group %d member %d element %zu: %.9g, want %.9g", g,
                             m, i, (double)part[m][i], (double)want);
            }
    }
    pp_transport_destroy(t);
}

Test(runtime_transport, allgather_and_reduce_scatter_place_and_sum_in_group_order)
{
    gather_then_scatter(0);
}

Test(runtime_transport, allgather_and_reduce_scatter_work_in_place)
{
    gather_then_scatter(1);
}

typedef struct {
    pp_transport *t;
    int rank;
    uint64_t h[TP_COLL_HASHES];
    pp_status st;
    char err[256];
} hash_arg;

static void *tp_hash_rank(void *p)
{
    hash_arg *a = p;
    a->st = tp_coll_check_rank(a->t, &tp_coll_host, a->rank, 4, a->h);
    if (a->st != PP_OK)
        snprintf(a->err, sizeof a->err, "%s", pp_err_msg());
    return NULL;
}

/* The thread transport's hashes of tests/tp_coll_check.h (test_runtime_mpi.c compares the MPI
 * transport's with them); the check itself asserts reduce-scatter == the all-reduce's slice. */
void tp_coll_thread_hashes(uint64_t h[4][TP_COLL_HASHES])
{
    pp_transport *t;
    OK(pp_transport_thread_create(4, NULL, &t));
    hash_arg a[4];
    pthread_t th[4];
    for (int r = 0; r < 4; r++) {
        a[r] = (hash_arg){.t = t, .rank = r, .st = PP_OK};
        cr_assert_eq(pthread_create(&th[r], NULL, tp_hash_rank, &a[r]), 0);
    }
    for (int r = 0; r < 4; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < 4; r++) {
        cr_assert_eq(a[r].st, PP_OK, "rank %d: %s", r, a[r].err);
        memcpy(h[r], a[r].h, sizeof a[r].h);
    }
    pp_transport_destroy(t);
}

Test(runtime_transport, reduce_scatter_equals_the_allreduce_slice)
{
    uint64_t h[4][TP_COLL_HASHES];
    tp_coll_thread_hashes(h);
    /* the gathered buffer is the same on every member of a group */
    cr_assert_eq(h[0][0], h[3][0]);
    cr_assert_eq(h[0][2], h[2][2]);
    cr_assert_eq(h[1][2], h[3][2]);
    cr_assert_neq(h[0][1], h[1][1], "members get different slices");
}

Test(runtime_transport, tp_collectives_reject_disagreeing_members_and_bad_groups)
{
    pp_transport *t;
    OK(pp_transport_thread_create(2, NULL, &t));
    int g[2] = {0, 1}, bad[2] = {1, 0};
    float part[4] = {0}, full[8] = {0};
    cr_assert_eq(pp_transport_allgather(t, 0, bad, 2, 1, part, full, 4), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "all-gather: group ranks must ascend"), "%s", pp_err_text());
    cr_assert_eq(pp_transport_reduce_scatter_sum(t, 0, g, 2, 1, NULL, part, 4), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "reduce-scatter: NULL buffer"), "%s", pp_err_text());
    /* rank 0 posts an all-reduce of 8 floats, rank 1 a reduce-scatter with the same tag */
    pp_transport_req *q0, *q1;
    OK(pp_transport_iallreduce_sum(t, 0, g, 2, 9, full, 8, &q0));
    cr_assert_eq(pp_transport_reduce_scatter_sum(t, 1, g, 2, 9, full, part, 4), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "reduce-scatter (tag 0x9): rank 1 contributes 4 floats, "
                                    "another member 8 to an all-reduce"),
              "%s", pp_err_text());
    float other[8] = {0};
    OK(pp_transport_iallreduce_sum(t, 1, g, 2, 9, other, 8, &q1));
    OK(pp_transport_wait(t, 1, q1));
    OK(pp_transport_wait(t, 0, q0));
    pp_transport_destroy(t);
}
