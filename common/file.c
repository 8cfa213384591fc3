/* file.c — files every module writes and reads: atomic replacement that cannot be redirected by
 * what others planted in the destination's folder, and bounded whole-file reads.
 *
 * Why so careful: profiles, traces and checkpoints are written into shared stores, /tmp and CI
 * workspaces, often as root. A predictable temporary name opened without O_EXCL lets anyone who
 * can write the folder plant a symbolic link there and make the next write truncate a file of
 * their choosing; a rename over a device node replaces /dev/null with a regular file. Reads
 * without a limit let `--cluster /dev/zero` take all memory. */
#include "pp_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The folder and the last component of path, in caller buffers. */
static void split_path(const char *path, char *dir, size_t n_dir, const char **base)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, n_dir, ".");
        *base = path;
    } else if (slash == path) {
        snprintf(dir, n_dir, "/");
        *base = slash + 1;
    } else {
        snprintf(dir, n_dir, "%.*s", (int)(slash - path), path);
        *base = slash + 1;
    }
}

/* 64 unpredictable bits: /dev/urandom, else the clock and the pid mixed (still unique enough
 * with O_EXCL, which is what makes the creation safe; the randomness only avoids collisions). */
static uint64_t random_bits(void)
{
    uint64_t r = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t got = read(fd, &r, sizeof r);
        close(fd);
        if (got == (ssize_t)sizeof r)
            return r;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
    r ^= r >> 33;
    r *= 0xff51afd7ed558ccdULL;
    return r ^ (r >> 29);
}

/* Whether an existing non-regular destination may be written through: a pipe, a terminal, or the
 * null device. */
static int write_through_ok(const struct stat *st, int fd)
{
    if (S_ISFIFO(st->st_mode))
        return 1;
    if (!S_ISCHR(st->st_mode))
        return 0;
    struct stat null_st;
    if (stat("/dev/null", &null_st) == 0 && S_ISCHR(null_st.st_mode) &&
        null_st.st_rdev == st->st_rdev)
        return 1;
    return fd >= 0 && isatty(fd);
}

int pp_afile_clean_stale(const char *path)
{
    char dir[4096];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    size_t blen = strlen(base);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (strncmp(name, base, blen) != 0 || strncmp(name + blen, ".tmp.", 5) != 0)
            continue;
        char *end;
        errno = 0;
        long pid = strtol(name + blen + 5, &end, 10);
        if (errno || pid <= 0 || end == name + blen + 5 || (*end != '\0' && *end != '.'))
            continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* its writer may still be running (or belongs to someone else) */
        struct stat st;
        if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (unlinkat(dirfd(d), name, 0) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}

static pp_status open_through(pp_afile *af, const char *path)
{
    int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !write_through_ok(&st, fd)) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return PP_ERR(PP_ERR_INVALID,
                      "%s exists and is not a regular file, a pipe, a terminal or /dev/null%s%s: "
                      "refusing to write it",
                      path, fd < 0 ? ": " : "", fd < 0 ? strerror(err) : "");
    }
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        close(fd);
        return PP_ERR(PP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    return PP_OK;
}

pp_status pp_afile_open(pp_afile *af, const char *path)
{
    memset(af, 0, sizeof *af);
    af->path = pp_strdup(path);
    if (!af->path)
        return PP_ERR_NOMEM;
    struct stat lst, st;
    if (lstat(path, &lst) == 0) {
        int through = 0;
        if (S_ISLNK(lst.st_mode))
            through = stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
        else if (S_ISDIR(lst.st_mode)) {
            free(af->path);
            af->path = NULL;
            return PP_ERR(PP_ERR_INVALID, "%s is a directory: give a file name", path);
        } else
            through = !S_ISREG(lst.st_mode);
        if (through) {
            pp_status s = open_through(af, path);
            if (s != PP_OK) {
                free(af->path);
                af->path = NULL;
            }
            return s;
        }
    }
    pp_afile_clean_stale(path);
    size_t n = strlen(path) + 48;
    af->tmp = pp_calloc(n, 1);
    if (!af->tmp) {
        free(af->path);
        memset(af, 0, sizeof *af);
        return PP_ERR_NOMEM;
    }
    int fd = -1;
    for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
        snprintf(af->tmp, n, "%s.tmp.%ld.%016llx", path, (long)getpid(),
                 (unsigned long long)random_bits());
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd >= 0)
        af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        pp_status st2 = PP_ERR(PP_ERR_IO, "%s: cannot create a temporary file beside it: %s",
                               path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(af->tmp);
        }
        free(af->path);
        free(af->tmp);
        memset(af, 0, sizeof *af);
        return st2;
    }
    return PP_OK;
}

static void afile_release(pp_afile *af)
{
    free(af->path);
    free(af->tmp);
    memset(af, 0, sizeof *af);
}

/* fsync of the folder holding path, so the rename survives a crash (best effort: some file
 * systems refuse to sync a directory). */
static void sync_folder(const char *path)
{
    char dir[4096];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

pp_status pp_afile_commit(pp_afile *af)
{
    pp_status st = PP_OK;
    int err = 0;
    if (fflush(af->fp) != 0 || ferror(af->fp))
        err = errno ? errno : EIO;
    if (!err && af->tmp && fsync(fileno(af->fp)) != 0)
        err = errno;
    if (fclose(af->fp) != 0 && !err)
        err = errno;
    af->fp = NULL;
    if (!err && af->tmp && rename(af->tmp, af->path) != 0)
        err = errno;
    if (err) {
        st = PP_ERR(PP_ERR_IO, "%s: write failed: %s%s", af->path, strerror(err),
                    af->tmp ? " (the previous file, if any, is unchanged)" : "");
        if (af->tmp)
            unlink(af->tmp);
    } else if (af->tmp) {
        sync_folder(af->path);
    }
    afile_release(af);
    return st;
}

void pp_afile_abort(pp_afile *af)
{
    if (af->fp)
        fclose(af->fp);
    if (af->tmp)
        unlink(af->tmp);
    afile_release(af);
}

pp_status pp_file_write_atomic(const char *path, const void *data, size_t len)
{
    pp_afile af;
    PP_TRY(pp_afile_open(&af, path));
    if (len && fwrite(data, 1, len, af.fp) != len) {
        pp_status st = PP_ERR(PP_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        pp_afile_abort(&af);
        return st;
    }
    return pp_afile_commit(&af);
}

pp_status pp_file_read_max(const char *path, size_t max, char **data, size_t *len)
{
    *data = NULL;
    if (len)
        *len = 0;
    /* O_NONBLOCK: opening a FIFO that has no writer would wait for one for good */
    int fd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) /* a file the user named that is not there is bad input (exit 2), not a failure */
        return PP_ERR(errno == ENOENT ? PP_ERR_NOTFOUND : PP_ERR_IO, "%s: cannot open: %s", path,
                      strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode))) {
        close(fd);
        return PP_ERR(PP_ERR_INVALID, "%s: not a regular file (%s)", path,
                      S_ISDIR(st.st_mode) ? "a directory" : "a device or socket");
    }
    if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > max) {
        close(fd);
        return PP_ERR(PP_ERR_INVALID, "%s: %jd bytes, more than the %zu MiB this reader accepts",
                      path, (intmax_t)st.st_size, max >> 20);
    }
    int pipe_in = S_ISFIFO(st.st_mode);
    if (!pipe_in) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
            (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 4096, n = 0;
    char *buf = malloc(cap);
    int err = 0;
    while (buf) {
        if (n + 1 == cap) {
            if (n >= max) {
                free(buf);
                close(fd);
                return PP_ERR(PP_ERR_INVALID, "%s: more than the %zu MiB this reader accepts",
                              path, max >> 20);
            }
            size_t ncap = pp_grow_max(&buf, n + 1, cap, 1, 0, max + 2); /* past max: refused */
            if (!ncap) {
                free(buf);
                buf = NULL;
                break;
            }
            cap = ncap;
        }
        if (pipe_in) { /* a pipe: at most PP_FILE_PIPE_WAIT_S for each next byte */
            struct pollfd pfd = {fd, POLLIN, 0};
            int r = poll(&pfd, 1, PP_FILE_PIPE_WAIT_S * 1000);
            if (r < 0 && errno == EINTR)
                continue;
            if (r == 0) {
                free(buf);
                close(fd);
                return PP_ERR(PP_ERR_INVALID,
                              "%s: a pipe that gave nothing for %d s (a FIFO without a writer?)",
                              path, PP_FILE_PIPE_WAIT_S);
            }
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && (errno == EINTR || (pipe_in && errno == EAGAIN)))
            continue;
        if (got < 0)
            err = errno;
        if (got <= 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    if (!buf)
        return PP_ERR(PP_ERR_NOMEM, "%s: out of memory reading file", path);
    if (err) {
        free(buf);
        return PP_ERR(PP_ERR_IO, "%s: read error: %s", path, strerror(err));
    }
    if (n > max) {
        free(buf);
        return PP_ERR(PP_ERR_INVALID, "%s: more than the %zu MiB this reader accepts", path,
                      max >> 20);
    }
    buf[n] = '\0';
    *data = buf;
    if (len)
        *len = n;
    return PP_OK;
}

pp_status pp_file_read(const char *path, char **data, size_t *len)
{
    return pp_file_read_max(path, PP_FILE_READ_MAX, data, len);
}

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device"
                                      : "not a regular file";
}

pp_status pp_file_open_regular(const char *path, int *fd, uint64_t *size)
{
    *fd = -1;
    *size = 0;
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer */
    int f = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (f < 0) /* a name that cannot be a file is bad input (exit 2), as one that is not there */
        return PP_ERR(errno == ENOENT || errno == ENOTDIR       ? PP_ERR_NOTFOUND
                      : errno == ENAMETOOLONG || errno == ELOOP ? PP_ERR_INVALID
                                                                : PP_ERR_IO,
                      "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(f, &st) != 0) {
        int err = errno;
        close(f);
        return PP_ERR(PP_ERR_IO, "%s: cannot read: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return PP_ERR(PP_ERR_INVALID, "%s: not a regular file (%s)", path, kind_of(st.st_mode));
    }
    int flags = fcntl(f, F_GETFL);
    if (flags >= 0)
        (void)fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
    *fd = f;
    *size = (uint64_t)st.st_size;
    return PP_OK;
}

pp_status pp_file_pread(int fd, const char *path, void *buf, size_t n, uint64_t off)
{
    char *p = buf;
    while (n > 0) {
        if (off > (uint64_t)INT64_MAX)
            return PP_ERR(PP_ERR_IO, "%s: offset %llu is past any file", path,
                          (unsigned long long)off);
        ssize_t got = pread(fd, p, n, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return PP_ERR(PP_ERR_IO, "%s: read error: %s", path, strerror(errno));
        if (got == 0)
            return PP_ERR(PP_ERR_IO,
                          "%s: shorter than expected (%zu bytes missing at offset %llu): was it "
                          "changed while being read?",
                          path, n, (unsigned long long)off);
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return PP_OK;
}
