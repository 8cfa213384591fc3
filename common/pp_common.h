/* pp_common.h — what every pptune module shares: status codes, the error trail, atomic files,
 * FNV-1a, the launcher's environment.
 *
 * Library code never prints or exits. A failing function records a message with
 * PP_ERR(status, fmt, ...) and returns the status; each caller that passes the failure upward
 * with PP_TRY(expr) appends its file:line, so the program that finally prints
 * pp_err_msg() shows what went wrong and the path it took:
 *
 *     model.json: "num_layers" must be a positive integer, got -3 [tuner/model.c:88 < tuner/cmd_search.c:41]
 *
 * The message is thread-local: ranks running as threads keep their own.
 */
#ifndef PP_COMMON_H
#define PP_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PP_OK = 0,
    PP_ERR_INVALID = -1,     /* bad argument or parameter combination */
    PP_ERR_NOMEM = -2,       /* host allocation failed */
    PP_ERR_IO = -3,          /* file or socket could not be read or written */
    PP_ERR_PARSE = -4,       /* input file malformed: message names file, field, expectation */
    PP_ERR_CHECK = -5,       /* a schedule failed validation */
    PP_ERR_DEADLOCK = -6,    /* a schedule cannot complete: ranks wait on each other */
    PP_ERR_UNSUPPORTED = -7, /* feature not built in or not available on this machine */
    PP_ERR_DEVICE = -8,      /* CUDA / NCCL / MPI / hwloc call failed */
    PP_ERR_OOM = -9,         /* device or budgeted memory exhausted */
    PP_ERR_TIMEOUT = -10,    /* a trial, transfer or request ran past its limit */
    PP_ERR_NOTFOUND = -11,   /* named thing (model, preset, profile) does not exist */
} pp_status;

/* Numeric precision of a training run, the one enum of every module (tuner options, pprun's
 * --precision, the CUDA backend). PP_PREC_FP32: fp32 throughout (the CPU backend; the CUDA
 * backend without TF32). PP_PREC_BF16: bf16 GEMM operands with fp32 accumulation; in the
 * tuner's models Megatron's mixed precision (bf16 weights, fp32 main grads, Adam). A zeroed
 * struct means fp32: the tuner's defaults (pp_tune_opts_default) set bf16 explicitly. */
typedef enum { PP_PREC_FP32 = 0, PP_PREC_BF16 = 1 } pp_precision;

/* Short name of a status ("invalid", "parse", ...). Never NULL. */
const char *pp_status_name(pp_status st);

#if defined(__GNUC__)
#define PP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PP_PRINTF(a, b)
#endif

/* Records a new message (replacing the previous one) and returns st. */
pp_status pp_err_set(pp_status st, const char *file, int line, const char *fmt, ...)
    PP_PRINTF(4, 5);
/* Appends " < file:line" to the trail of the current message and returns st. */
pp_status pp_err_trace(pp_status st, const char *file, int line);
/* The current message of this thread, with its trail; "" when none. Valid until the next set. */
const char *pp_err_msg(void);
/* The message without the file:line trail (for users who do not want it). */
const char *pp_err_text(void);
void pp_err_clear(void);
/* Replaces this thread's message by msg verbatim (its trail included), of which the first
 * text_len bytes are the text without the trail (as pp_err_text gives it), and returns st: how
 * a message crosses from one copy of this library to another (a plugin loaded with dlopen links
 * its own, probes/plugin.c). */
pp_status pp_err_restore(pp_status st, const char *msg, size_t text_len);
/* Writes s to fp with control characters escaped (\n, \r, \t, else \xNN), so that a message
 * echoing a user's argument or a file's text stays one line and sends no terminal escapes. */
void pp_fputs_escaped(const char *s, FILE *fp);
/* The formatters of what people read (fmt.c), one per quantity, for every command, the report
 * and pprun; each writes into buf (truncated, terminated) and returns buf.
 * x rounded to an integer with thousands grouped: "1,581,229" (tokens/s, counts). */
char *pp_fmt_grouped(double x, char *buf, size_t n);
/* seconds with 4 significant digits, trailing zeros kept: "1.520", "0.01234"; whole seconds
 * from 10^4 on, seven decimals below 10^-4 ("0.0000012": never an exponent); "0" for zero.
 * No unit (the caller says "s"). */
char *pp_fmt_seconds(double s, char *buf, size_t n);
/* bytes in the largest binary unit it reaches, with the unit: "66.6 GiB", "1.71 GiB",
 * "512 MiB", "3.00 KiB", "12 B" (three significant digits). */
char *pp_fmt_bytes(double bytes, char *buf, size_t n);
/* The binary unit pp_fmt_bytes gives `ref` ("GiB", "MiB", "KiB", "B"), its size in bytes in
 * *scale: for parts written in their total's unit. */
const char *pp_fmt_bytes_unit(double ref, double *scale);
/* a parameter (or token) count with B (10^9), M (10^6) or K (10^3): "13.0 B", "61.1 M",
 * "12.3 K"; below 1,000 the integer. */
char *pp_fmt_params(double count, char *buf, size_t n);
/* "0.1.0 (git fe8d7ad01c)", or "0.1.0" built outside a git checkout: what --version prints
 * after the program's name (pp_version.h, written at configure time). */
const char *pp_version(void);
/* Writes text to fp with its lines wrapped at spaces to `width` columns; a wrapped line starts
 * with `indent` spaces. The newlines in text are kept. */
void pp_fputs_wrapped(FILE *fp, const char *text, int width, int indent);

#define PP_ERR(st, ...) pp_err_set((st), __FILE__, __LINE__, __VA_ARGS__)
#define PP_TRY(expr)                                                                               \
    do {                                                                                           \
        pp_status pp_try_st_ = (expr);                                                             \
        if (pp_try_st_ != PP_OK)                                                                   \
            return pp_err_trace(pp_try_st_, __FILE__, __LINE__);                                   \
    } while (0)

/* Allocation that records PP_ERR_NOMEM on failure. n * size is checked for overflow. */
void *pp_calloc(size_t n, size_t size);
void *pp_realloc_array(void *p, size_t n, size_t size);
char *pp_strdup(const char *s);
/* The one grow-by-doubling of an array: makes room for element n of the array *arr_ptr points
 * to (arr_ptr: the address of a `T *`, elements of `size` bytes, `cap` allocated). Returns the
 * capacity to keep: cap itself while n < cap, else twice cap (`first` when cap is 0) with *arr
 * reallocated to it; 0 when that fails (PP_ERR_NOMEM recorded, *arr and its elements intact). */
size_t pp_grow(void *arr_ptr, size_t n, size_t cap, size_t size, size_t first);
/* pp_grow for a bounded buffer: never past max elements (the capacity is at most max; n must be
 * below it, which the caller refuses beforehand: 0 with PP_ERR_INVALID otherwise). */
size_t pp_grow_max(void *arr_ptr, size_t n, size_t cap, size_t size, size_t first, size_t max);
/* a, b and c concatenated (a path: pp_strjoin(dir, "/", name)), or NULL with PP_ERR_NOMEM. */
char *pp_strjoin(const char *a, const char *b, const char *c);

/* Atomic file output (file.c). pp_afile_open creates a temporary file next to PATH, exclusively
 * (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0644 less the umask) under an unpredictable name
 * "PATH.tmp.<pid>.<random>", so a link or file planted in the folder is never followed or
 * truncated; it first removes the temporaries of PATH that dead processes left. pp_afile_commit
 * flushes, fsyncs, renames it over PATH and fsyncs the folder; pp_afile_abort removes it. Either
 * commit or abort must be called exactly once. A reader never sees a partial file.
 * A PATH that exists and is not a regular file is never replaced: a pipe, a terminal or the null
 * device (-o /dev/stdout, /dev/null) is written through, with no temporary file (tmp is NULL);
 * anything else (a directory, a block or other device, a socket) is refused with PP_ERR_INVALID.
 * A symbolic link at PATH is followed only to those write-through targets; otherwise the link
 * itself is replaced by the new file, and its target is left alone. */
typedef struct {
    FILE *fp;
    char *path;
    char *tmp; /* NULL when writing through to a pipe or device */
} pp_afile;
pp_status pp_afile_open(pp_afile *af, const char *path);
pp_status pp_afile_commit(pp_afile *af);
void pp_afile_abort(pp_afile *af);
/* Writes len bytes atomically. */
pp_status pp_file_write_atomic(const char *path, const void *data, size_t len);
/* Removes the temporary files "PATH.tmp.<pid>[.<anything>]" next to PATH whose process <pid> no
 * longer exists (a writer killed before its commit). Matches the literal name, never a pattern.
 * Returns how many it removed. */
int pp_afile_clean_stale(const char *path);

/* Reads a whole file into a NUL-terminated buffer the caller frees: a regular file or a pipe
 * (refuses directories and devices), of at most PP_FILE_READ_MAX bytes (PP_ERR_INVALID naming the
 * file and the limit beyond that, read no further). PP_ERR_NOTFOUND when there is no such file
 * (bad input: exit 2), PP_ERR_IO when it cannot be read. pp_file_read_max takes its own limit. */
#define PP_FILE_READ_MAX ((size_t)64 << 20)
/* A pipe is opened without blocking and waited on at most this long for each next byte: a FIFO
 * nobody writes is refused (PP_ERR_INVALID) rather than waited on for good. */
#define PP_FILE_PIPE_WAIT_S 5
pp_status pp_file_read(const char *path, char **data, size_t *len);
pp_status pp_file_read_max(const char *path, size_t max, char **data, size_t *len);

/* Opens path for reading at offsets (pp_file_pread), for formats too large to read whole
 * (checkpoints, datasets): only a regular file is accepted (a directory, a FIFO, a device or a
 * socket is refused with PP_ERR_INVALID naming it; a FIFO is opened without blocking so that
 * refusing it cannot hang), *size gets its length in bytes. PP_ERR_NOTFOUND when there is no
 * such file, PP_ERR_INVALID for a name too long or a loop of links, PP_ERR_IO when it cannot
 * be opened otherwise. The caller closes *fd. */
pp_status pp_file_open_regular(const char *path, int *fd, uint64_t *size);
/* Reads exactly n bytes at offset off of fd (path names it in messages), retrying short
 * reads and EINTR. PP_ERR_IO when the file ends first ("... shorter than expected") or the read
 * fails. */
pp_status pp_file_pread(int fd, const char *path, void *buf, size_t n, uint64_t off);

/* ---- text from outside (text.c) --------------------------------------------------------------
 * A string a reader keeps from a file or a server (a profile's, a cluster file's) is checked on
 * entry with pp_text_ok; whatever prints it into a program or a file that something else
 * interprets quotes it for that language, and a message that quotes it shows it escaped. */
#define PP_TEXT_MAX 4096
/* 1: len bytes at s are text a reader may keep: UTF-8, at most PP_TEXT_MAX bytes, without
 * control characters (C0, DEL, C1) or the line and paragraph separators U+2028 / U+2029. */
int pp_text_ok(const char *s, size_t len);
/* s as a double-quoted literal of printable ASCII only: \\ \" \n \r \t, other controls and DEL
 * as \xNN, other code points as \uXXXX or \UXXXXXXXX, a byte that is not UTF-8 as \xNN (read
 * back as U+00NN). Python's string literals and YAML's double-quoted scalars read these escapes
 * alike, so it is either; it holds no line break, so it is also safe inside a comment of
 * Python, YAML or sh. */
void pp_fput_quoted(FILE *fp, const char *s);
/* s as one word for sh: as it is when it has only letters, digits and _ . / : = @ % + , -,
 * otherwise in single quotes (a ' inside as '\''); '' for the empty string. */
void pp_fput_sh_word(FILE *fp, const char *s);
/* s (NULL: "") escaped as pp_fput_quoted's body (printable ASCII only, no quotes around it), cut
 * to fit n bytes with "..." at the end when longer: for messages that quote outside text, so
 * that a terminal never receives its escape sequences. Returns buf. */
const char *pp_text_show(const char *s, char *buf, size_t n);

/* FNV-1a, 64 bit: h' = (h XOR byte) * prime for each byte, starting from PP_FNV1A_BASIS.
 * pp_fnv1a hashes n bytes, pp_fnv1a_str a NUL-terminated string (without the NUL); both
 * continue from h, so a hash can be built piece by piece. Not cryptographic. */
#define PP_FNV1A_BASIS 14695981039346656037ull /* 0xcbf29ce484222325 */
#define PP_FNV1A_PRIME 1099511628211ull        /* 0x100000001b3 */
uint64_t pp_fnv1a(uint64_t h, const void *data, size_t n);
uint64_t pp_fnv1a_str(uint64_t h, const char *s);

/* ---- SHA-256 (common/sha256.c, FIPS 180-4): store checksums, cluster fingerprints ---- */
/* hex: 65 bytes (64 lowercase hex digits + NUL). */
void pp_sha256_hex(const void *data, size_t len, char hex[65]);

/* ---- the launcher (common/launch.c) ---- */
/* Where this process sits in a job started by a launcher, read from the environment (no MPI
 * call): Open MPI's OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK, else Slurm's SLURM_PROCID /
 * SLURM_STEP_NUM_TASKS (or SLURM_NTASKS) / SLURM_LOCALID, else PMI_RANK / PMI_SIZE /
 * MPI_LOCALRANKID (MPICH, Intel MPI). Without any: rank 0 of 1, launcher "none". */
typedef struct {
    int rank, size;       /* this process in the job */
    int local_rank;       /* among the job's processes on this node; -1 when not given */
    const char *launcher; /* "openmpi", "slurm", "pmi" or "none" (a static string) */
} pp_launch_info;

/* PP_ERR_INVALID when a variable is not a number or the rank is outside 0..size-1 (the
 * message names the variable and its value). */
pp_status pp_launch_detect(pp_launch_info *out);
/* The threads each of the ranks_here ranks of this process takes by default (pprun's BLAS and
 * kernel threads without --threads / --kernel-threads): OPENBLAS_NUM_THREADS where set
 * (1..1024; *from = "OPENBLAS_NUM_THREADS"), else the CPUs this process may run on (its
 * affinity mask: taskset, cgroups' cpusets, Slurm's binding; else the online ones) / ranks_here,
 * at least 1 (*from = NULL). from may be NULL. The tuner's model of a pprun trial takes it too. */
int pp_launch_threads_per_rank(int ranks_here, const char **from);

/* Groups the n ranks of a job by host. hosts holds each rank's host name in a slot of `stride`
 * bytes (as MPI_Allgather of gethostname leaves them). Fills, where not NULL, node_of[r]: the
 * index of r's host, hosts numbered in order of first appearance (so the first rank of node k
 * is the first r with node_of[r] == k); local_rank[r]: the number of lower ranks on the same
 * host (its host-local rank, 0 for the host's first). Returns the number of hosts. */
int pp_launch_hosts(const char *hosts, size_t stride, int n, int *node_of, int *local_rank);

/* This process's node name: SLURMD_NODENAME inside a Slurm job step (the name the job was
 * given the node by, which tells nodes apart even where several share a host name), else the
 * host name. Writes at most n bytes, NUL-terminated; "" when neither is known. */
void pp_launch_node_name(char *buf, size_t n);

/* Monotonic wall clock in seconds. */
double pp_now(void);

#ifdef __cplusplus
}
#endif
#endif
