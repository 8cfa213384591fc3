/* pp_rt.h — the bundled pipeline runtime: a GPT-style decoder split into stages, backends that
 * compute it, transports that move tensors between ranks, and the executor that walks a
 * pp_sched's per-rank action lists for one training step.
 *
 * Layering (each part usable on its own, tested on its own):
 *   pp_model_cfg      sizes of the model (layers, hidden, heads, ffn, vocab, seq)
 *   pp_backend        a table of functions (buffers with byte accounting, GEMM, layer kernels)
 *                     + a context; the CPU backend (OpenBLAS + C) is the numerical reference
 *   pp_rt_stage       the parameters, gradients and saved activations of one stage (a layer
 *                     range, plus the embedding on a pipe's first stage and final LN + head +
 *                     loss on its last); forward / backward of one micro-batch at a time
 *   pp_transport      a table of functions moving tensors between ranks (threads in-process,
 *                     processes over MPI; NCCL in runtime/cuda/)
 *   pp_rt_executor    runs every rank's actions for one step, then gradient syncs and AdamW
 *
 * Shapes: B micro-batch size, T sequence length, C hidden, V vocabulary. Activations passed
 * between stages are fp32 (B, T, C) row-major; tokens are int32 (B, T).
 * Ownership: *_create returns an object the caller frees with *_destroy (NULL is a no-op).
 */
#ifndef PP_RT_H
#define PP_RT_H

#include <stddef.h>
#include <stdint.h>

#include "pp_common.h"
#include "pp_sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Model ------------------------------------------------------------------------------- */
typedef struct {
    int layers; /* L transformer blocks */
    int hidden; /* C */
    int heads;  /* NH; C % NH == 0 */
    int ffn;    /* MLP width, usually 4C */
    int vocab;  /* V */
    int seq;    /* maximum sequence length (learned positions) */
} pp_model_cfg;

/* Runnable presets: "tiny" (CI-sized), "small", "gpt-125m", ... PP_ERR_NOTFOUND lists the names. */
pp_status pp_model_preset(const char *name, pp_model_cfg *out);
/* Checks the sizes (positive, heads divide hidden); messages name the field. */
pp_status pp_model_validate(const pp_model_cfg *cfg);

/* ---- Memory accounting ------------------------------------------------------------------- */
typedef enum {
    PP_MEM_WEIGHTS = 0,
    PP_MEM_GRADS,
    PP_MEM_OPTIM,
    PP_MEM_ACTS,      /* activations saved for backward */
    PP_MEM_COMM,      /* send / receive buffers */
    PP_MEM_WORKSPACE, /* scratch of the kernels */
    PP_MEM__COUNT
} pp_mem_category;

const char *pp_mem_category_name(pp_mem_category c); /* "weights", "grads", ... */

typedef struct {
    size_t current[PP_MEM__COUNT]; /* bytes held now */
    size_t peak[PP_MEM__COUNT];    /* high-water mark of each category */
    size_t current_total;
    size_t peak_total; /* high-water mark of the sum (not the sum of peaks) */
} pp_mem_stats;

/* ---- Backend ----------------------------------------------------------------------------- */
/* A backend is a table of callbacks plus a context (ggml-backend style). Every byte the
 * runtime uses is allocated through it and counted in its pp_mem_stats. The kernels' exact
 * list is private to runtime/ (runtime/backend.h); code outside runtime/ only creates,
 * queries and destroys backends. One backend instance per rank. */
typedef struct pp_backend pp_backend;

pp_status pp_backend_cpu_create(pp_backend **out);

/* The CUDA backend (runtime/cuda/): device memory, cuBLAS GEMMs, CUDA kernels, on one device.
 * PP_PREC_FP32 computes in fp32 throughout (no TF32: the numerical twin of the CPU backend);
 * PP_PREC_BF16 keeps every tensor fp32 (master weights, activations, gradients) and runs the
 * GEMMs on bf16 copies of their operands, made at the GEMM boundary in a backend workspace,
 * with fp32 accumulation and fp32 results (what users train with); from the first AdamW step
 * on it also keeps a bf16 copy of every weight it updates (2 bytes per parameter, counted under
 * "weights") so that GEMMs read weights without converting them. Kernels run in order on the
 * backend's compute stream; download and xent_fwd (the loss) wait for them.
 * Use it from one thread whose current device is `device` (create sets it on the calling
 * thread; one process per GPU, as under mpirun, needs nothing more).
 * PP_ERR_UNSUPPORTED when built without CUDA or when the machine has no CUDA device (the
 * message says which), PP_ERR_INVALID for a bad device index or precision. */
typedef enum { PP_PREC_FP32 = 0, PP_PREC_BF16 = 1 } pp_precision;
pp_status pp_backend_cuda_create(int device, int precision, pp_backend **out);
/* CUDA-only queries; PP_ERR_UNSUPPORTED for any other backend (or a build without CUDA).
 * sync: waits for the compute and communication streams. timer: CUDA events on the compute
 * stream; stop waits for the stop event and gives the milliseconds between start and stop.
 * mem_info: the device's free and total bytes as the driver sees them (cudaMemGetInfo), next
 * to the backend's own accounting (pp_backend_mem_stats). */
pp_status pp_backend_cuda_sync(pp_backend *be);
pp_status pp_backend_cuda_timer_start(pp_backend *be);
pp_status pp_backend_cuda_timer_stop(pp_backend *be, double *ms);
pp_status pp_backend_cuda_mem_info(pp_backend *be, size_t *free_bytes, size_t *total_bytes);
/* The backend's device index and its two streams as opaque handles (cudaStream_t values, for
 * a CUDA-aware transport such as NCCL: it enqueues on `comm` and orders itself against
 * `compute` with events; no CUDA type crosses this header). */
pp_status pp_backend_cuda_streams(pp_backend *be, int *device, void **compute, void **comm);
/* Device-side timing (runtime/cuda/marks_cuda.cu): n CUDA events on the backend's compute
 * stream. record(i) marks the point the stream has reached once the work queued so far is done;
 * read waits for the stream and gives seconds[i] = time from mark 0 to mark i (-1 for a mark
 * not recorded since the last read), then forgets the records. The executor marks every
 * action with them, so its spans on a CUDA backend are device time, not launch time. */
typedef struct pp_cuda_marks pp_cuda_marks;
pp_status pp_cuda_marks_create(pp_backend *be, int n, pp_cuda_marks **out);
pp_status pp_cuda_marks_record(pp_cuda_marks *mk, int i);
pp_status pp_cuda_marks_read(pp_cuda_marks *mk, double *seconds); /* seconds[n] */
void pp_cuda_marks_destroy(pp_cuda_marks *mk);
/* CUDA devices the driver reports: 0 in a build without CUDA or on a machine without one. */
int pp_cuda_device_count(void);
void pp_backend_destroy(pp_backend *be);
const char *pp_backend_name(const pp_backend *be);
void pp_backend_mem_stats(const pp_backend *be, pp_mem_stats *out);
void pp_backend_mem_reset_peak(pp_backend *be);
/* Buffers in the backend's memory (host for CPU, device for CUDA), counted under `cat`. */
void *pp_backend_alloc(pp_backend *be, size_t bytes, pp_mem_category cat);
void pp_backend_free(pp_backend *be, void *p, size_t bytes, pp_mem_category cat);

/* ---- Stage ------------------------------------------------------------------------------- */
typedef struct pp_rt_stage pp_rt_stage;

typedef struct {
    const pp_model_cfg *model;
    int layer_begin, layer_end; /* [begin, end) transformer blocks; may be empty */
    int has_embed;              /* token + position embedding (a pipe's first stage) */
    int has_head;               /* final LN, LM head tied to the token embedding, loss */
    int micro_batch;            /* B */
    int seq;                    /* T <= model->seq */
    uint64_t seed;              /* every tensor derives from (seed, layer, name): a layer's
                                   weights are identical wherever it is placed */
} pp_rt_stage_params;

/* A named parameter tensor with its gradient (both in backend memory, fp32, n elements).
 * Names are stable across placements: "wte", "wpe", "h3.ln1.g", "h3.attn.qkv.w", "lnf.b",
 * and "wte.head" for the head's copy of the tied embedding on a stage that has the head but
 * not the embedding (its gradient is summed with the first stage's "wte", as Megatron does). */
typedef struct {
    const char *name;
    float *data;
    float *grad;
    size_t n;
} pp_rt_tensor;

pp_status pp_rt_stage_create(pp_backend *be, const pp_rt_stage_params *p, pp_rt_stage **out);
void pp_rt_stage_destroy(pp_rt_stage *st);
/* Bytes of the activation tensor a stage sends / receives: B*T*C*4. */
size_t pp_rt_stage_io_bytes(const pp_rt_stage *st);
/* Bytes of the activations one forward saves until its backward (PP_MEM_ACTS per in-flight
 * slot): the memory model's "activations per micro-batch" of this stage, exactly. */
size_t pp_rt_stage_act_bytes(const pp_rt_stage *st);
/* Forward of one micro-batch. slot identifies it until its backward (the micro-batch id):
 * the stage saves what backward needs under that slot (counted as PP_MEM_ACTS).
 *   tokens  (B,T) int32 in host memory, required when has_embed, else NULL (checked against
 *           the vocabulary here, then uploaded into the slot)
 *   x_in    (B,T,C) input activation when !has_embed, else NULL
 *   targets (B,T) int32 in host memory, required when has_head, else NULL
 *   x_out   (B,T,C) output when !has_head, else NULL
 *   loss    when has_head: receives the mean cross-entropy of this micro-batch */
pp_status pp_rt_stage_forward(pp_rt_stage *st, int slot, const int32_t *tokens, const float *x_in,
                              const int32_t *targets, float *x_out, float *loss);
/* Backward of the micro-batch in `slot`, accumulating into the parameter gradients and freeing
 * the slot's saved activations.
 *   dx_out    (B,T,C) gradient of the output when !has_head, else NULL
 *   dx_in     (B,T,C) receives the gradient of the input when !has_embed, else NULL
 *   loss_scale when has_head: d(total loss)/d(this micro-batch's mean loss), e.g. 1/(N*dp) */
pp_status pp_rt_stage_backward(pp_rt_stage *st, int slot, const float *dx_out, float *dx_in,
                               float loss_scale);
/* The stage's parameter tensors (owned by the stage). */
pp_rt_tensor *pp_rt_stage_tensors(pp_rt_stage *st, int *n);
/* The stage's tensor with this name ("h3.attn.qkv.w", "wte.head"), or NULL if it holds none. */
pp_rt_tensor *pp_rt_stage_tensor(pp_rt_stage *st, const char *name);
void pp_rt_stage_zero_grad(pp_rt_stage *st);

/* AdamW (Loshchilov & Hutter), applied to every tensor of the stage. grad_scale multiplies the
 * gradients first (1 or a clipping factor); step counts from 1. Optimizer state is allocated on
 * the first call (PP_MEM_OPTIM). Weight decay is not applied to LayerNorm gains/biases or biases. */
typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
} pp_adamw;
pp_status pp_rt_stage_adamw(pp_rt_stage *st, const pp_adamw *hp, int step, float grad_scale);

/* ---- Transport --------------------------------------------------------------------------- */
/* A transport moves bytes between ranks and sums float vectors over groups of ranks. It is a
 * table of callbacks plus a context (runtime/transport.h, private), like the backend; the
 * in-process one (ranks are threads of one process) is built here, MPI and NCCL come later
 * through the same table. Rank r's calls are made by rank r's thread only; every call names
 * the calling rank. Buffers are host memory for the in-process transport.
 *
 * Point to point: send is buffered and never blocks (the schedule IR's SEND); recv blocks
 * until a message from `from` with `tag` has arrived and been copied out (its size must
 * match). Messages between one pair with different tags may be received in any order.
 * Collectives: iallreduce_sum posts this rank's part and returns at once; the sum over the
 * group (summed in the group's order, so every member gets bit-identical floats) is in `data`
 * once pp_transport_wait returns. Members must pass the same group (ascending ranks) and tag;
 * `data` must not be touched between post and wait. A hop that stays on a rank never reaches
 * the transport: the executor hands the buffer over directly. */
typedef struct pp_transport pp_transport;
typedef struct pp_transport_req pp_transport_req;

/* The in-process transport for `ranks` threads. backends: NULL, or [ranks] backends in which
 * each rank's send buffers are counted as PP_MEM_COMM (allocated and freed on the sender's
 * thread only, as the backends are not thread-safe). */
pp_status pp_transport_thread_create(int ranks, pp_backend *const *backends, pp_transport **out);
void pp_transport_destroy(pp_transport *t);
const char *pp_transport_name(const pp_transport *t); /* "thread" */
int pp_transport_ranks(const pp_transport *t);

/* Point-to-point tag of the activation (dir 0) or gradient (dir 1) hop of micro-batch mb
 * into / out of `stage` of `pipe`: the executor tags a hop with the stage that receives it. */
uint64_t pp_transport_tag(int pipe, int stage, int mb, int dir);

pp_status pp_transport_send(pp_transport *t, int from, int to, uint64_t tag, const void *buf,
                            size_t bytes);
pp_status pp_transport_recv(pp_transport *t, int to, int from, uint64_t tag, void *buf,
                            size_t bytes);
/* *req is released by pp_transport_wait (also when it fails). */
pp_status pp_transport_iallreduce_sum(pp_transport *t, int rank, const int *group, int n_group,
                                      uint64_t tag, float *data, size_t n,
                                      pp_transport_req **req);
pp_status pp_transport_wait(pp_transport *t, int rank, pp_transport_req *req);
/* iallreduce_sum + wait. */
pp_status pp_transport_allreduce_sum(pp_transport *t, int rank, const int *group, int n_group,
                                     uint64_t tag, float *data, size_t n);
/* All ranks of the transport. */
pp_status pp_transport_barrier(pp_transport *t, int rank);
/* Waits until every message `rank` sent has been received, and releases their buffers. */
pp_status pp_transport_flush(pp_transport *t, int rank);
/* Wakes every blocked call, which then fails (PP_ERR_DEVICE, "aborted"), as do later calls:
 * a rank that failed calls this so its peers do not wait forever. Any thread may call it. */
void pp_transport_abort(pp_transport *t);

/* Ranks as processes (runtime/transport_mpi.c): one rank per process of MPI_COMM_WORLD, the
 * process's rank there. Initialises MPI (MPI_Init_thread, FUNNELED: call every pp_transport_*
 * of this transport from the thread that created it) unless the caller already did, and then
 * finalises it in pp_transport_destroy. Point to point: send copies into a buffer posted with
 * MPI_Isend and kept until it completes (counted as PP_MEM_COMM in the backend the executor
 * binds to the rank), recv is MPI_Recv. All-reduce: every member sends its part to the
 * group's first rank, which sums them in group order and sends the sum back, so the floats
 * are bit-identical to the in-process transport's. abort calls MPI_Abort (the only way to
 * wake peers blocked in another process): print what went wrong first.
 * PP_ERR_UNSUPPORTED when built without MPI; PP_ERR_DEVICE when MPI fails (its text). */
pp_status pp_transport_mpi_create(pp_transport **out);
/* The one rank this process is (process transports such as MPI), or -1 when every rank is a
 * thread of this process (the in-process transport). */
int pp_transport_self(const pp_transport *t);
/* GPU ranks over NCCL (runtime/cuda/transport_nccl.cu; compile-checked, not yet run on a
 * GPU): one rank per process on `device` (the launch's local rank: pp_launch_local_rank),
 * bootstrapped over `boot` (the MPI transport, borrowed: destroy it after this one), which
 * carries rank 0's NCCL unique ids to the others before ncclCommInitRank. Buffers are device
 * memory of the CUDA backend bound to the rank; sends are queued and issued as one NCCL group
 * with the next receive on the backend's communication stream; messages between two ranks
 * must be received in the order sent (checked: an error names both tags). All-reduce sums in
 * group order at the group's first rank, like the CPU transports. PP_ERR_UNSUPPORTED when
 * built without CUDA; PP_ERR_INVALID for a device this node does not have. */
pp_status pp_transport_nccl_create(pp_transport *boot, int device, pp_transport **out);

/* ---- Launch ------------------------------------------------------------------------------ */
/* pp_launch_info and pp_launch_detect (the launcher's environment): pp_common.h. */
/* This process's rank among those of the job on its host: the launcher's local rank when it
 * gives one, else computed over MPI (host names gathered with MPI_Allgather; the rank is the
 * count of lower world ranks on the same host). For cudaSetDevice(local_rank). The MPI path
 * needs MPI initialised (PP_ERR_UNSUPPORTED without MPI). */
pp_status pp_launch_local_rank(const pp_launch_info *li, int *local_rank);

/* ---- Data -------------------------------------------------------------------------------- */
/* Token streams for training: the bytes of a text file (vocabulary 256), or a deterministic
 * synthetic stream from a seed. A batch is `rows` windows of T+1 consecutive tokens (inputs
 * are the first T, targets the last T), each window starting at an offset drawn from the seed. */
typedef struct pp_rt_data pp_rt_data;

/* PP_ERR_IO when the file cannot be read, PP_ERR_INVALID when it is shorter than 2 bytes. */
pp_status pp_rt_data_open_text(const char *path, uint64_t seed, pp_rt_data **out);
/* A stream over vocab tokens in which each token usually follows from the previous one by a
 * fixed random map (a learnable bigram structure), sometimes not. */
pp_status pp_rt_data_synthetic(int vocab, uint64_t seed, pp_rt_data **out);
void pp_rt_data_destroy(pp_rt_data *d);
int pp_rt_data_vocab(const pp_rt_data *d);
/* Fills out[rows][T+1]. PP_ERR_INVALID if a text is shorter than T+1 tokens. */
pp_status pp_rt_data_next(pp_rt_data *d, int rows, int T, int32_t *out);

/* ---- Executor ---------------------------------------------------------------------------- */
/* Runs training steps of a schedule: dp pipeline replicas of sched->ranks ranks each, every
 * rank a thread with its own backend (CPU unless pp_rt_exec_params.backend says CUDA),
 * talking through the in-process transport. Global
 * rank g = replica * D + r. Each rank holds the stages the schedule places on it; bidirectional
 * schedules hold two replicas of every layer (one per pipe) which start identical (same seed).
 *
 * One step: every rank walks its action list (RECV via the transport, F/B through the stage
 * with slot = micro-batch id, SEND via the transport; hops between stages of one rank handed
 * over directly; REDUCE posted as a non-blocking all-reduce over its participants); then,
 * per rank, wait for the REDUCEs, sum the tied embedding gradient ("wte" of a pipe's first
 * stage + "wte.head" of its last, as Megatron), all-reduce across the dp replicas, the global
 * gradient norm (each layer counted once), optional clipping, AdamW.
 * The loss is the mean over the N micro-batches of all dp replicas (loss_scale 1/(N*dp)).
 *
 * Data: a step consumes dp*N*B rows of T+1 tokens; micro-batch m of replica k is rows
 * (k*N + m)*B .. +B, so a one-stage reference over the same rows sees the same data. */
typedef struct pp_rt_executor pp_rt_executor;

typedef struct {
    const pp_model_cfg *model;
    const pp_sched *sched; /* copied; sched->layers must equal model->layers */
    int micro_batch;       /* B >= 1 */
    int seq;               /* T, 1..model->seq */
    int dp;                /* data-parallel pipeline replicas >= 1 */
    uint64_t seed;         /* parameter initialisation */
    pp_adamw adamw;
    float clip; /* clip the global gradient norm to this; 0 = no clipping */
    /* NULL: every rank a thread of this process (an in-process transport the executor owns).
     * Else a process transport of dp * D ranks (borrowed: destroy it after the executor) of
     * which this process is pp_transport_self(): the executor then creates and runs that rank
     * only, on the calling thread. Losses and the gradient norm of a step are shared with
     * every process; spans of every rank are gathered on rank 0. */
    pp_transport *transport;
    /* The ranks' backends (zero: CPU). PP_RT_BACKEND_CUDA: a CUDA backend of `precision`
     * (pp_precision) per rank, on device `device` under a process transport (the launch's
     * local rank), else rank g on device g % pp_cuda_device_count(). Every tensor then lives
     * in device memory: the in-process and MPI transports get it staged through host memory
     * (download, send, upload), a CUDA-aware transport (NCCL) gets device pointers.
     * PP_ERR_UNSUPPORTED without CUDA or without a device (the message says which). */
    int backend; /* pp_rt_backend_kind */
    int precision;
    int device;
} pp_rt_exec_params;

/* PP_RT_BACKEND_CPU_STAGED: CPU backends whose tensors the executor nevertheless moves through
 * host staging copies exactly as it does a CUDA backend's (for tests: the staging path runs,
 * and must give the CPU run's floats bit for bit, on a machine without a GPU). */
typedef enum {
    PP_RT_BACKEND_CPU = 0,
    PP_RT_BACKEND_CUDA = 1,
    PP_RT_BACKEND_CPU_STAGED = 2
} pp_rt_backend_kind;

typedef struct {
    double start, end; /* seconds since the step began */
} pp_rt_span;

typedef struct {
    double loss;      /* mean cross-entropy over the step's dp*N micro-batches */
    double grad_norm; /* global L2 norm of the (summed) model gradient, before clipping */
    double seconds;   /* wall time of the step */
    int n_ranks;      /* dp * D */
    /* Owned by the executor, valid until its next step: */
    const pp_rt_span *const *spans; /* [n_ranks][sched->n_ops[g % D]] every action */
    const pp_rt_span *sync;         /* [n_ranks] gradient synchronisation after the actions */
    const pp_rt_span *optim;        /* [n_ranks] clipping + AdamW (0-length when !update) */
} pp_rt_step_result;

/* Validates the parameters (messages name the value), creates backends, stages, transport.
 * PP_ERR_INVALID for a schedule that does not fit the model, PP_ERR_CHECK/DEADLOCK from
 * pp_sched_check. */
pp_status pp_rt_executor_create(const pp_rt_exec_params *p, pp_rt_executor **out);
void pp_rt_executor_destroy(pp_rt_executor *ex);
/* Runs one step on batch[dp*N*B][T+1]. update = 0 stops after the gradient synchronisation
 * (gradients stay in the stages, parameters unchanged: for tests and gradient checks).
 * After a failed step the executor is unusable (destroy it). */
pp_status pp_rt_executor_step(pp_rt_executor *ex, const int32_t *batch, int update,
                              pp_rt_step_result *out);
int pp_rt_executor_ranks(const pp_rt_executor *ex); /* dp * D */
const pp_sched *pp_rt_executor_sched(const pp_rt_executor *ex);
/* Rows of T+1 tokens one step consumes: dp * N * B. */
int pp_rt_executor_batch_rows(const pp_rt_executor *ex);
/* The stage object of (pipe, stage) in a replica, and the backend of global rank g. */
pp_rt_stage *pp_rt_executor_stage(pp_rt_executor *ex, int replica, int pipe, int stage);
pp_backend *pp_rt_executor_backend(pp_rt_executor *ex, int g);
/* With a process transport: the global rank this process runs (the others' stages and
 * backends are NULL here); -1 when every rank is a thread of this process. */
int pp_rt_executor_self(const pp_rt_executor *ex);
/* Memory statistics of every global rank into out[n_ranks]. With a process transport every
 * process must call it (it is a gather): rank 0 gets them all, another process its own. */
pp_status pp_rt_executor_mem_stats(pp_rt_executor *ex, pp_mem_stats *out);
/* A checksum of every parameter of every replica, bit for bit: FNV-1a (64 bit) over each
 * stage's tensors' float bits in tensor order, then FNV-1a over those stage hashes in
 * (replica, pipe, stage) order. Equal checksums mean equal parameters wherever the ranks ran.
 * A gather like pp_rt_executor_mem_stats: valid on rank 0 (0 on the other processes). */
pp_status pp_rt_executor_param_checksum(pp_rt_executor *ex, uint64_t *out);

/* ---- Checkpoints (checkpoint.c) ---------------------------------------------------------- */
/* A run's state in one file, written atomically (PATH.tmp.<pid>, fsync, rename: a run killed
 * at any moment leaves the previous checkpoint or the new one): every stage's parameters and
 * AdamW state (m, v) of every replica, the optimizer step, the data position, the per-step
 * history. Loading restores them bit for bit, so the run continues exactly as if it had not
 * stopped. Every rank must be a thread of this process (PP_ERR_UNSUPPORTED under MPI). */
typedef struct {
    const char *config;    /* in: the caller's part of the run's identity ("data=synthetic");
                            * the executor adds its own (model, schedule, B, T, dp, seed,
                            * AdamW, clip); a load compares both and names the first difference */
    int step;              /* optimizer steps applied = history entries */
    uint64_t data_batches; /* batches the data stream has handed out (the caller replays it) */
    double *loss, *grad_norm, *seconds; /* [step] history (caller-owned) */
    uint64_t state_hash; /* out: FNV-1a 64 of step, data position, losses, gradient norms,
                          * parameters and optimizer state (not the step times) */
} pp_rt_ckpt;

/* ck->step must equal the steps the executor has applied. */
pp_status pp_rt_checkpoint_save(pp_rt_executor *ex, const char *path, pp_rt_ckpt *ck);
/* Restores path into ex (NULL: only reads and verifies the file, filling step, data_batches
 * and state_hash). The history is copied into ck's arrays when cap > 0 (they hold cap
 * entries; a checkpoint past cap steps is PP_ERR_INVALID). PP_ERR_NOTFOUND: no such file;
 * PP_ERR_PARSE: truncated or corrupted; PP_ERR_INVALID: another run's checkpoint. The file is
 * verified whole before ex is touched. */
pp_status pp_rt_checkpoint_load(pp_rt_executor *ex, const char *path, int cap, pp_rt_ckpt *ck);

/* ---- Chrome trace ------------------------------------------------------------------------ */
/* Writes the timed actions of steps as a Chrome trace (JSON "traceEvents", opens in Perfetto
 * and chrome://tracing): one track per global rank, one complete event per action, plus the
 * gradient sync and optimizer phases, a flow arrow from every SEND to its RECV, and a track
 * with each step. Written to PATH.tmp.<pid>, renamed on commit; tr reads the executor's
 * schedule, so commit or abort it before destroying the executor. */
typedef struct pp_rt_trace pp_rt_trace;
pp_status pp_rt_trace_open(const char *path, const pp_rt_executor *ex, pp_rt_trace **out);
/* t0: seconds from the start of the run to the start of this step. */
pp_status pp_rt_trace_add_step(pp_rt_trace *tr, int step, double t0, const pp_rt_step_result *r);
/* Both free tr. */
pp_status pp_rt_trace_commit(pp_rt_trace *tr);
void pp_rt_trace_abort(pp_rt_trace *tr);

#ifdef __cplusplus
}
#endif
#endif
