/* child.c — one program as a child process with a time limit (child.h): its own process group,
 * stdout and stderr read through pipes into bounded buffers (head and tail kept) while the parent
 * polls and reaps under one deadline; past it the whole group gets SIGTERM, then SIGKILL.
 * Whatever the child left running in its group is ended either way, and so it is when the tuner
 * itself dies (SIGKILL, a crash) while the child runs: the child gets SIGTERM as its parent dies
 * (PR_SET_PDEATHSIG, Linux), and a watchdog process per child outlives the tuner just long
 * enough to end the whole group (SIGTERM, then SIGKILL). Not here: what the output
 * means (trials.c classifies a trial, alloc_probe.c reads a probe's JSON).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"

/* The child's output is kept bounded (a child flooding stdout must not take the tuner's
 * memory): the first BUF_HEAD bytes and the last BUF_TAIL bytes, with the count dropped between
 * them. The JSON summary and the error line are small and come first or last. */
#define BUF_HEAD (768 * 1024)
#define BUF_TAIL (256 * 1024)

typedef struct {
    char *data;          /* head, then (buf_finish) the joined text; NUL-terminated */
    size_t len, cap;     /* head bytes held, allocated */
    char *tail;          /* ring of BUF_TAIL bytes once the head is full */
    size_t tail_pos;     /* next write in the ring */
    unsigned long long tail_total, dropped; /* bytes through the ring; bytes lost */
} buf;

static int buf_read(int fd, buf *b)
{
    char chunk[65536];
    ssize_t r = read(fd, chunk, sizeof chunk);
    if (r <= 0)
        return (int)r;
    size_t n = (size_t)r, k = 0;
    if (b->len < BUF_HEAD) { /* the head grows to BUF_HEAD */
        size_t want = b->len + n < BUF_HEAD ? b->len + n : BUF_HEAD;
        size_t cap = pp_grow_max(&b->data, want, b->cap, 1, 65536, BUF_HEAD + 1); /* and NUL */
        if (!cap)
            return -1;
        b->cap = cap;
        k = want - b->len;
        memcpy(b->data + b->len, chunk, k);
        b->len = want;
        b->data[b->len] = '\0';
    }
    if (k < n && !b->tail && !(b->tail = malloc(BUF_TAIL)))
        return -1;
    for (; k < n; k++) { /* the rest through the ring: what falls out of it is dropped */
        if (b->tail_total >= BUF_TAIL)
            b->dropped++;
        b->tail[b->tail_pos] = chunk[k];
        b->tail_pos = (b->tail_pos + 1) % BUF_TAIL;
        b->tail_total++;
    }
    return (int)r;
}

/* Joins head, a note on what was dropped, and the tail into b->data. */
static void buf_finish(buf *b)
{
    if (!b->tail)
        return;
    size_t held = b->tail_total < BUF_TAIL ? (size_t)b->tail_total : BUF_TAIL;
    char note[96];
    int nl = b->dropped ? snprintf(note, sizeof note, "\n[... %llu bytes dropped ...]\n",
                                   b->dropped)
                        : 0;
    char *d = realloc(b->data, b->len + (size_t)nl + held + 1);
    if (d) {
        memcpy(d + b->len, note, (size_t)nl);
        size_t start = b->tail_total < BUF_TAIL ? 0 : b->tail_pos;
        for (size_t i = 0; i < held; i++)
            d[b->len + (size_t)nl + i] = b->tail[(start + i) % BUF_TAIL];
        b->len += (size_t)nl + held;
        d[b->len] = '\0';
        b->data = d;
    }
    free(b->tail);
    b->tail = NULL;
}

/* How long a child's leftovers (a wrapper's children still holding the pipes) may keep writing
 * after the child itself exited, and how long the group has between SIGTERM and SIGKILL. */
#define AFTER_EXIT_S 1.0
#define KILL_GRACE_S 2.0

/* Waits for output on fds (n of them; 0: just sleeps) for at most s seconds, and no more than
 * 50 ms so that the child's exit is noticed (a poll error or EINTR is retried by the caller
 * against the same deadline). */
static void poll_for(struct pollfd *fds, nfds_t n, double s)
{
    int ms = s <= 0 ? 0 : s > 0.05 ? 50 : (int)(s * 1000) + 1;
    (void)poll(fds, n, ms);
}

/* One deadline over reading and reaping: collects the child's output and reaps it, until the
 * child has exited and both pipes closed (or AFTER_EXIT_S passed since its exit), or the
 * deadline passes. Returns 1 on timeout, 0 when *wstatus holds the child's status. */
static int collect(pid_t pid, int out_fd, int err_fd, double deadline, buf *out, buf *err,
                   int *wstatus)
{
    struct pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    int open_fds = 2, reaped = 0;
    double exited_at = 0;
    for (;;) {
        if (!reaped && waitpid(pid, wstatus, WNOHANG) == pid)
            reaped = 1, exited_at = pp_now();
        if (reaped && (open_fds == 0 || pp_now() - exited_at > AFTER_EXIT_S))
            return 0;
        double left = deadline - pp_now();
        if (left <= 0 && !reaped)
            return 1; /* timed out */
        if (left <= 0)
            return 0; /* exited in time; only its leftovers still write */
        for (int i = 0; i < 2; i++)
            fds[i].revents = 0;
        poll_for(fds, 2, left);
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (buf_read(fds[i].fd, i == 0 ? out : err) <= 0) {
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
}

/* Ends the child's process group (the child and whatever it started): SIGTERM, KILL_GRACE_S to
 * exit, then SIGKILL; reaps the child unless reaped is set. */
static void end_group(pid_t pid, int reaped, int *wstatus)
{
    kill(-pid, SIGTERM);
    double until = pp_now() + KILL_GRACE_S;
    while (!reaped && pp_now() < until) {
        if (waitpid(pid, wstatus, WNOHANG) == pid)
            reaped = 1;
        else
            poll_for(NULL, 0, until - pp_now());
    }
    kill(-pid, SIGKILL);
    while (!reaped && waitpid(pid, wstatus, 0) < 0 && errno == EINTR)
        ;
}

/* Whether any process of group g is left (a zombie still counts until reaped, by whoever
 * inherited it: it cannot run). */
static int group_alive(pid_t g)
{
    return kill(-g, 0) == 0 || errno == EPERM;
}

/* The watchdog (a process of its own, outside the child's group, started per child): it waits
 * on the read end of a pipe whose only write end the tuner holds. A byte means the tuner ended
 * the group itself: nothing to do. End of file without one means the tuner died (SIGKILL, a
 * crash): the group gets what end_group would have given it, SIGTERM (srun and mpirun end
 * their step and job on it; on Linux the leader's comes from PR_SET_PDEATHSIG), KILL_GRACE_S
 * for the group to be gone, then SIGKILL. It ignores the signals a terminal or
 * a `kill` of the tuner's group sends, so that it outlives the tuner exactly as long as that
 * takes. */
static void watchdog(int life_fd, pid_t g)
{
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    char b;
    ssize_t r;
    while ((r = read(life_fd, &b, 1)) < 0 && errno == EINTR)
        ;
    if (r == 1)
        _exit(0);
#ifndef __linux__
    /* on Linux the leader had its SIGTERM as the tuner died (PR_SET_PDEATHSIG): a second one
     * would make mpirun abort at once, leaving its ranks, where one lets it end its job */
    if (kill(-g, SIGTERM) != 0)
        kill(g, SIGTERM); /* the child had not made its group yet */
#endif
    double until = pp_now() + KILL_GRACE_S;
    while (group_alive(g) && pp_now() < until)
        poll_for(NULL, 0, until - pp_now());
    if (kill(-g, SIGKILL) != 0)
        kill(g, SIGKILL);
    _exit(0);
}

/* Starts the watchdog of group g; *life_w receives the write end the tuner keeps (-1 when no
 * watchdog could be started: the child then runs as before, ended by the tuner only). */
static pid_t watchdog_start(pid_t g, int life[2], int *life_w)
{
    *life_w = -1;
    pid_t w = fork();
    if (w == 0) {
        close(life[1]);
        watchdog(life[0], g);
    }
    close(life[0]);
    if (w < 0) {
        close(life[1]);
        return -1;
    }
    *life_w = life[1];
    return w;
}

/* Tells the watchdog the group was ended here, and reaps it. */
static void watchdog_stop(pid_t w, int life_w)
{
    if (w < 0)
        return;
    ssize_t r;
    while ((r = write(life_w, "x", 1)) < 0 && errno == EINTR)
        ;
    close(life_w);
    while (waitpid(w, NULL, 0) < 0 && errno == EINTR)
        ;
}

pp_status pp_tune_child_run(char *const *argv, double timeout_s, pp_tune_child *c)
{
    memset(c, 0, sizeof *c);
    int out_p[2], err_p[2];
    if (pipe(out_p) != 0)
        return PP_ERR(PP_ERR_IO, "%s: pipe: %s", argv[0], strerror(errno));
    if (pipe(err_p) != 0) {
        close(out_p[0]), close(out_p[1]);
        return PP_ERR(PP_ERR_IO, "%s: pipe: %s", argv[0], strerror(errno));
    }
    /* the watchdog's pipe: close-on-exec, so that the program holds no write end of it */
    int life[2] = {-1, -1};
    if (pipe(life) != 0)
        life[0] = life[1] = -1;
    for (int i = 0; i < 2 && life[0] >= 0; i++)
        (void)fcntl(life[i], F_SETFD, FD_CLOEXEC);
    double t0 = pp_now();
    pid_t tuner = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(out_p[0]), close(out_p[1]), close(err_p[0]), close(err_p[1]);
        if (life[0] >= 0)
            close(life[0]), close(life[1]);
        return PP_ERR(PP_ERR_IO, "%s: fork: %s", argv[0], strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0); /* its own process group, ended as a group (end_group) */
#ifdef __linux__
        /* the first line of defence when the tuner dies: SIGTERM to the leader (srun and mpirun
         * end their step and job on it, pprun exits), even if the watchdog was killed with the
         * tuner (`kill -9` of both); the watchdog then ends the rest of the group */
        (void)prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != tuner)
            _exit(127); /* the tuner died before the line above */
#endif
        /* stdin from /dev/null: srun and mpirun forward stdin to rank 0, and a launcher in a
         * background process group reading the terminal would stop (SIGTTIN) until killed */
        int null_fd = open("/dev/null", O_RDONLY);
        if (null_fd >= 0 && null_fd != 0) {
            dup2(null_fd, 0);
            close(null_fd);
        }
        dup2(out_p[1], 1);
        dup2(err_p[1], 2);
        close(out_p[0]), close(out_p[1]), close(err_p[0]), close(err_p[1]);
        execvp(argv[0], argv); /* pprun itself, or srun / mpirun from PATH */
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also here: no race with the child's own call */
    close(out_p[1]), close(err_p[1]);
    int life_w = -1;
    pid_t dog = life[0] >= 0 ? watchdog_start(pid, life, &life_w) : -1;
    buf out = {0}, err = {0};
    c->killed = collect(pid, out_p[0], err_p[0], t0 + timeout_s, &out, &err, &c->wstatus);
    end_group(pid, !c->killed, &c->wstatus);
    watchdog_stop(dog, life_w);
    close(out_p[0]), close(err_p[0]);
    buf_finish(&out);
    buf_finish(&err);
    free(out.tail);
    free(err.tail);
    c->wall_s = pp_now() - t0;
    c->out = out.data;
    c->err = err.data;
    return PP_OK;
}

void pp_tune_child_fini(pp_tune_child *c)
{
    if (!c)
        return;
    free(c->out);
    free(c->err);
    c->out = c->err = NULL;
}
