/* cuda_emu.cpp — a CPU emulation of the parts of the CUDA runtime and cuBLAS that the CUDA backend
 * (runtime/cuda/{backend_cuda,kernels_cuda,attention_cuda,weights_bf16}.cu) uses, so that the
 * backend's own code runs in the tests on a machine without a GPU, the way nvcc's old
 * -deviceemu mode did: the .cu files are compiled as host C++ against the headers beside this
 * file (PP_CUDA_EMU), and the suite cuda_emu runs tests/test_cuda.c and tests/test_cuda_exec.c
 * against that build. TESTS ONLY.
 *
 * What this checks: the backend's LOGIC — indexing, launch geometry (invalid configurations fail
 * as on a GPU), the row-major/column-major mapping onto cuBLAS and its leading dimensions and
 * strides (checked as cuBLAS documents, and against the bounds of the allocations), bf16 rounding
 * and the bf16 copy bookkeeping, reductions, barriers (a __syncthreads or warp exchange that not
 * every thread reaches aborts, naming the kernel), memory accounting and the out-of-memory path,
 * copies whose direction contradicts their pointers, and (where the CPU has memory protection
 * keys) host code that reads or writes device memory, which faults as on a GPU.
 * What it does NOT model, so it proves nothing about the backend on a GPU (which remains
 * compile-checked only): concurrency between streams (every call runs at once, in call order),
 * the GPU memory model and memory consistency, races between the threads of a block outside
 * barriers (threads run one after another, each until its next barrier), warp-synchronous code
 * without a *_sync intrinsic, real cuBLAS algorithms and their precision and summation order
 * (here: a naive loop accumulating in fp32, k in order), TF32 and other math modes (ignored),
 * timing (events are host clock readings), and the difference between host and device pointers
 * inside kernels (kernels may dereference host memory; without protection keys, host code may
 * dereference device memory too).
 *
 * Files: cuda_emu.cpp (this: errors, devices, memory, streams, events), cuda_emu_kernels.cpp
 * (launches: blocks in order on the launching thread, threads as fibers, barriers, warp
 * exchanges, deadlock detection), cuda_emu_blas.cpp (cuBLAS); the headers beside them.
 * cuda_emu_arena.cpp (device memory: one reserved arena; where the CPU has memory protection keys,
 * host code touching device memory outside kernels, copies and GEMMs faults, as on a GPU).
 * Knobs (environment): PP_CUDA_EMU_PROTECT=0 (no protection key), PP_CUDA_EMU_DEVICES (device
 * count, default 1; 0 = no device), PP_CUDA_EMU_MEM_LIMIT (bytes of each emulated device, default
 * 80 GiB; allocations past it fail with cudaErrorMemoryAllocation).
 */
#include "cublas_v2.h"
#include "cuda_bf16.h"
#include "cuda_emu_impl.h"
#include "cuda_runtime.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

void pp_emu_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cuda_emu: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\n", stderr);
    va_end(ap);
    abort();
}

/* ---- errors ---- */

static thread_local cudaError_t last_error = cudaSuccess;

cudaError_t pp_emu_fail(cudaError_t e)
{
    last_error = e;
    return e;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "cudaSuccess";
    case cudaErrorInvalidValue:
        return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
        return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
        return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice:
        return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
        return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
        return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
        return "cudaErrorNotReady";
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInvalidConfiguration:
        return "invalid configuration argument";
    case cudaErrorNoDevice:
        return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
        return "invalid resource handle";
    case cudaErrorNotReady:
        return "device not ready";
    }
    return "unknown error";
}

/* ---- devices ---- */

static constexpr int EMU_MAX_DEVICES = 16;
static thread_local int cur_device = 0;

static size_t env_size(const char *name, size_t dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end)
        pp_emu_die("%s=\"%s\" is not a number", name, s);
    return (size_t)v;
}

int pp_emu_device_count(void)
{
    size_t n = env_size("PP_CUDA_EMU_DEVICES", 1);
    return n < (size_t)EMU_MAX_DEVICES ? (int)n : EMU_MAX_DEVICES;
}

static size_t device_total(void)
{
    return env_size("PP_CUDA_EMU_MEM_LIMIT", (size_t)80 << 30);
}

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return pp_emu_fail(cudaErrorInvalidValue);
    *count = pp_emu_device_count();
    return *count ? cudaSuccess : pp_emu_fail(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= pp_emu_device_count())
        return pp_emu_fail(cudaErrorInvalidDevice);
    cur_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    if (!prop)
        return pp_emu_fail(cudaErrorInvalidValue);
    if (device < 0 || device >= pp_emu_device_count())
        return pp_emu_fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "pptune CPU emulation of CUDA (device %d)", device);
    prop->totalGlobalMem = device_total();
    prop->multiProcessorCount = 8;
    prop->maxThreadsPerBlock = 1024;
    prop->warpSize = 32;
    prop->major = 9;
    return cudaSuccess;
}

/* ---- memory: every live allocation is recorded (base -> size, device) so that copies, frees,
 * cuBLAS operands and cudaMemGetInfo can be checked against it ---- */

namespace
{
struct alloc_rec {
    size_t bytes;
    int device;
};
std::mutex mem_mu;
std::map<const char *, alloc_rec> mem_live;
size_t mem_used[EMU_MAX_DEVICES];
} // namespace

static size_t bytes_of(const alloc_rec &r)
{
    return r.bytes;
}

static size_t bytes_of(size_t bytes)
{
    return bytes;
}

bool pp_emu_in_device_memory(const void *p, size_t bytes)
{
    std::lock_guard<std::mutex> g(mem_mu);
    const char *c = (const char *)p;
    auto it = mem_live.upper_bound(c);
    if (it == mem_live.begin())
        return false;
    --it;
    return c >= it->first && bytes <= it->second.bytes &&
           (size_t)(c - it->first) <= it->second.bytes - bytes;
}

/* PP_CUDA_EMU_CHECK_FREED=1: at exit, device memory still allocated is reported on stderr (the
 * device's LeakSanitizer: pprun's tests use it to see every buffer freed by the end). */
namespace
{
struct freed_check {
    ~freed_check()
    {
        const char *on = getenv("PP_CUDA_EMU_CHECK_FREED");
        if (!on || strcmp(on, "1") != 0)
            return;
        std::lock_guard<std::mutex> g(mem_mu);
        size_t bytes = 0;
        for (const auto &kv : mem_live)
            bytes += kv.second.bytes;
        if (!mem_live.empty())
            fprintf(stderr, "cuda_emu: at exit %zu device allocations (%zu bytes) were never "
                            "freed\n",
                    mem_live.size(), bytes);
    }
} check_freed_at_exit;
} // namespace

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    if (!p)
        return pp_emu_fail(cudaErrorInvalidValue);
    *p = NULL;
    if (!bytes)
        return cudaSuccess;
    std::lock_guard<std::mutex> g(mem_mu);
    size_t total = device_total(), used = mem_used[cur_device];
    if (bytes > total || used > total - bytes)
        return pp_emu_fail(cudaErrorMemoryAllocation);
    void *q = pp_emu_arena_alloc(bytes); /* 256-byte aligned, as cudaMalloc's */
    if (!q)
        return pp_emu_fail(cudaErrorMemoryAllocation);
    /* fresh device memory holds garbage: all-ones bytes are NaN as floats, -1 as integers, so
     * code that reads what it never wrote shows up in the results */
    pp_emu_device_enter();
    memset(q, 0xff, bytes);
    pp_emu_device_leave();
    mem_live[(const char *)q] = alloc_rec{bytes, cur_device};
    mem_used[cur_device] += bytes;
    *p = q;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (!p)
        return cudaSuccess;
    std::lock_guard<std::mutex> g(mem_mu);
    auto it = mem_live.find((const char *)p);
    if (it == mem_live.end())
        return pp_emu_fail(cudaErrorInvalidValue); /* not an allocation's base, or freed twice */
    mem_used[it->second.device] -= it->second.bytes;
    pp_emu_arena_free(p, it->second.bytes);
    mem_live.erase(it);
    return cudaSuccess;
}

namespace
{
enum : unsigned { STREAM_MAGIC = 0x57e4a11u, EVENT_MAGIC = 0xe7e47u };
} // namespace
/* A stream's asynchronous work (pp_emu_async, cuda_emu_impl.h), in order; the front one is
 * started. done counts the operations completed, enq those ever enqueued: an event recorded
 * when enq was n is complete once done reaches n. Shared with the events recorded on it, which
 * may outlive the stream. */
struct emu_queue {
    std::mutex mu;
    std::deque<std::unique_ptr<pp_emu_async>> ops;
    bool front_started = false;
    unsigned long long enq = 0, done = 0;
};
struct pp_emu_stream {
    unsigned magic;
    int device;
    std::shared_ptr<emu_queue> q;
};
struct pp_emu_event {
    unsigned magic;
    int recorded;
    double ms;                     /* host clock at the record */
    std::shared_ptr<emu_queue> q;  /* the stream recorded on (NULL: nothing to wait for) */
    unsigned long long seq;        /* its work up to here */
};
struct pp_emu_pool {
    int device;
};

bool pp_emu_stream_ok(cudaStream_t s)
{
    return !s || s->magic == STREAM_MAGIC; /* NULL: the default stream */
}

static std::shared_ptr<emu_queue> default_queue = std::make_shared<emu_queue>();

static emu_queue &queue_of(cudaStream_t s)
{
    return s ? *s->q : *default_queue;
}

/* Starts and tests q's work in order, as far as it completes now. */
static void queue_progress(emu_queue &q)
{
    std::lock_guard<std::mutex> g(q.mu);
    while (!q.ops.empty()) {
        if (!q.front_started) {
            q.front_started = true;
            q.ops.front()->start();
        }
        if (!q.ops.front()->test())
            return;
        q.ops.pop_front();
        q.front_started = false;
        q.done++;
    }
}

/* Every stream with pending work: a GPU runs all streams at once, so any wait here moves them
 * all (a rank blocked on one stream's receive must still see its sends on another start). */
static std::mutex busy_mu;
static std::vector<std::shared_ptr<emu_queue>> busy;

static void progress_all(void)
{
    std::vector<std::shared_ptr<emu_queue>> qs;
    {
        std::lock_guard<std::mutex> g(busy_mu);
        qs = busy;
    }
    for (auto &q : qs)
        queue_progress(*q);
    std::lock_guard<std::mutex> g(busy_mu);
    for (size_t i = 0; i < busy.size();) {
        bool idle;
        {
            std::lock_guard<std::mutex> gq(busy[i]->mu);
            idle = busy[i]->ops.empty();
        }
        if (idle) {
            busy[i] = busy.back();
            busy.pop_back();
        } else {
            i++;
        }
    }
}

static bool queue_reached(emu_queue &q, unsigned long long seq)
{
    queue_progress(q);
    progress_all();
    std::lock_guard<std::mutex> g(q.mu);
    return q.done >= seq;
}

static double now_ms(void);

/* Until q has completed its first seq operations; aborts on a wait that cannot end. */
static void queue_wait(emu_queue &q, unsigned long long seq)
{
    if (queue_reached(q, seq))
        return;
    static const double limit_ms = 1e3 * (double)env_size("PP_CUDA_EMU_WAIT_S", 60);
    double t0 = now_ms();
    struct timespec nap = {0, 20000}; /* 20 us: the peer processes share the cores */
    while (!queue_reached(q, seq)) {
        if (now_ms() - t0 > limit_ms) {
            char what[256] = "?";
            {
                std::lock_guard<std::mutex> g(q.mu);
                if (!q.ops.empty())
                    q.ops.front()->describe(what, sizeof what);
            }
            pp_emu_die("a stream waited %.0f s for %s: a deadlock (on a GPU this would hang; "
                       "PP_CUDA_EMU_WAIT_S sets the limit)",
                       limit_ms / 1e3, what);
        }
        nanosleep(&nap, NULL);
    }
}

void pp_emu_stream_enqueue(cudaStream_t s, pp_emu_async *op)
{
    std::shared_ptr<emu_queue> q = s ? s->q : default_queue;
    {
        std::lock_guard<std::mutex> g(q->mu);
        q->ops.emplace_back(op);
        q->enq++;
    }
    {
        std::lock_guard<std::mutex> g(busy_mu);
        bool known = false;
        for (auto &b : busy)
            known = known || b == q;
        if (!known)
            busy.push_back(q);
    }
    queue_progress(*q); /* starts it when nothing is ahead of it */
}

void pp_emu_stream_drain(cudaStream_t s)
{
    emu_queue &q = queue_of(s);
    unsigned long long seq;
    {
        std::lock_guard<std::mutex> g(q.mu);
        if (q.done == q.enq)
            return;
        seq = q.enq;
    }
    queue_wait(q, seq);
}

cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s)
{
    if (!pp_emu_stream_ok(s))
        return pp_emu_fail(cudaErrorInvalidResourceHandle);
    return cudaMalloc(p, bytes);
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
    if (!pp_emu_stream_ok(s))
        return pp_emu_fail(cudaErrorInvalidResourceHandle);
    return cudaFree(p);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
    if (!pp_emu_stream_ok(s))
        return pp_emu_fail(cudaErrorInvalidResourceHandle);
    if (!bytes)
        return cudaSuccess;
    if (!dst || !src)
        return pp_emu_fail(cudaErrorInvalidValue);
    /* a direction that contradicts the pointers is an error on a GPU too (or worse) */
    bool dst_dev = pp_emu_in_device_memory(dst, bytes),
         src_dev = pp_emu_in_device_memory(src, bytes);
    bool ok = kind == cudaMemcpyDefault ||
              (kind == cudaMemcpyHostToDevice && dst_dev && !src_dev) ||
              (kind == cudaMemcpyDeviceToHost && src_dev && !dst_dev) ||
              (kind == cudaMemcpyDeviceToDevice && src_dev && dst_dev) ||
              (kind == cudaMemcpyHostToHost && !src_dev && !dst_dev);
    if (!ok) {
        fprintf(stderr,
                "cuda_emu: cudaMemcpyAsync of %zu bytes, kind %d, but dst %p is %s memory and "
                "src %p is %s memory\n",
                bytes, (int)kind, dst, dst_dev ? "device" : "host", src,
                src_dev ? "device" : "host");
        return pp_emu_fail(cudaErrorInvalidValue);
    }
    pp_emu_stream_drain(s); /* after the stream's pending work (stream order) */
    const char *d = (const char *)dst, *c = (const char *)src;
    if (d < c + bytes && c < d + bytes)
        pp_emu_die(
            "cudaMemcpyAsync: overlapping ranges dst %p, src %p, %zu bytes (undefined in CUDA)",
            dst, src, bytes);
    pp_emu_device_enter();
    memcpy(dst, src, bytes);
    pp_emu_device_leave();
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s)
{
    if (!pp_emu_stream_ok(s))
        return pp_emu_fail(cudaErrorInvalidResourceHandle);
    if (!bytes)
        return cudaSuccess;
    if (!pp_emu_in_device_memory(dst, bytes)) {
        fprintf(stderr, "cuda_emu: cudaMemsetAsync of %zu bytes at %p: not device memory\n", bytes,
                dst);
        return pp_emu_fail(cudaErrorInvalidValue);
    }
    pp_emu_stream_drain(s);
    pp_emu_device_enter();
    memset(dst, value, bytes);
    pp_emu_device_leave();
    return cudaSuccess;
}

namespace
{
std::map<const char *, size_t> host_live; /* cudaMallocHost's blocks (under mem_mu) */
} // namespace

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    if (!p)
        return pp_emu_fail(cudaErrorInvalidValue);
    *p = NULL;
    void *q = NULL;
    if (posix_memalign(&q, 256, bytes ? bytes : 1) != 0)
        return pp_emu_fail(cudaErrorMemoryAllocation);
    std::lock_guard<std::mutex> g(mem_mu);
    host_live[(const char *)q] = bytes;
    *p = q;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    if (!p)
        return cudaSuccess;
    std::lock_guard<std::mutex> g(mem_mu);
    auto it = host_live.find((const char *)p);
    if (it == host_live.end())
        return pp_emu_fail(cudaErrorInvalidValue); /* not from cudaMallocHost */
    host_live.erase(it);
    free(p);
    return cudaSuccess;
}

/* The block of m holding c, or m.end(). */
template <typename M> static typename M::const_iterator block_of(const M &m, const char *c)
{
    auto it = m.upper_bound(c);
    if (it == m.begin())
        return m.end();
    --it;
    return (size_t)(c - it->first) < (bytes_of(it->second) ? bytes_of(it->second) : 1) ? it
                                                                                       : m.end();
}

/* As CUDA 11 and later: memory the runtime does not know is cudaMemoryTypeUnregistered. */
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attr, const void *p)
{
    if (!attr)
        return pp_emu_fail(cudaErrorInvalidValue);
    memset(attr, 0, sizeof *attr);
    attr->type = cudaMemoryTypeUnregistered;
    attr->device = -2;
    std::lock_guard<std::mutex> g(mem_mu);
    const char *c = (const char *)p;
    auto d = block_of(mem_live, c);
    auto h = block_of(host_live, c);
    if (d != mem_live.end()) {
        attr->type = cudaMemoryTypeDevice;
        attr->device = d->second.device;
        attr->devicePointer = (void *)p;
    } else if (h != host_live.end()) {
        attr->type = cudaMemoryTypeHost;
        attr->device = cur_device;
        attr->hostPointer = attr->devicePointer = (void *)p;
    }
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    if (!free_bytes || !total_bytes)
        return pp_emu_fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> g(mem_mu);
    size_t total = device_total(), used = mem_used[cur_device];
    *total_bytes = total;
    *free_bytes = used < total ? total - used : 0;
    return cudaSuccess;
}

/* ---- streams, events, pools ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    if (!s || (flags & ~cudaStreamNonBlocking))
        return pp_emu_fail(cudaErrorInvalidValue);
    *s = new pp_emu_stream{STREAM_MAGIC, cur_device, std::make_shared<emu_queue>()};
    return cudaSuccess;
}

/* As CUDA: the stream's pending work still completes (here: before the call returns). */
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (!s || s->magic != STREAM_MAGIC)
        return pp_emu_fail(cudaErrorInvalidResourceHandle);
    pp_emu_stream_drain(s);
    s->magic = 0;
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (!pp_emu_stream_ok(s))
        return pp_emu_fail(cudaErrorInvalidResourceHandle);
    pp_emu_stream_drain(s);
    return cudaSuccess;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bool event_ok(cudaEvent_t e)
{
    return e && e->magic == EVENT_MAGIC;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return cudaEventCreateWithFlags(e, cudaEventDefault);
}

/* Flags are checked, not modelled (a timing-disabled event still reads the clock). */
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    if (!e || (flags & ~cudaEventDisableTiming))
        return pp_emu_fail(cudaErrorInvalidValue);
    *e = new pp_emu_event{EVENT_MAGIC, 0, 0.0, nullptr, 0};
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    if (!event_ok(e))
        return pp_emu_fail(cudaErrorInvalidResourceHandle);
    e->magic = 0;
    delete e;
    return cudaSuccess;
}

/* Captures the stream's work so far: the event completes when that work has. */
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (!event_ok(e) || !pp_emu_stream_ok(s))
        return pp_emu_fail(cudaErrorInvalidResourceHandle);
    e->recorded = 1;
    e->ms = now_ms(); /* the stream's kernels and copies queued before it have already run */
    std::shared_ptr<emu_queue> q = s ? s->q : default_queue;
    std::lock_guard<std::mutex> g(q->mu);
    e->q = q->done == q->enq ? nullptr : q;
    e->seq = q->enq;
    return cudaSuccess;
}

/* As CUDA: an event never recorded is complete. */
cudaError_t cudaEventQuery(cudaEvent_t e)
{
    if (!event_ok(e))
        return pp_emu_fail(cudaErrorInvalidResourceHandle);
    if (e->q && !queue_reached(*e->q, e->seq))
        return cudaErrorNotReady; /* not an error: CUDA leaves the last error alone */
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    if (!event_ok(e))
        return pp_emu_fail(cudaErrorInvalidResourceHandle);
    if (e->q)
        queue_wait(*e->q, e->seq);
    return cudaSuccess;
}

/* On a GPU only s waits; here s's later work runs as soon as it is called, so the event's work
 * must have completed first: the host waits for it now. */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    if (!event_ok(e) || !pp_emu_stream_ok(s))
        return pp_emu_fail(cudaErrorInvalidResourceHandle);
    if (flags)
        return pp_emu_fail(cudaErrorInvalidValue);
    if (e->q)
        queue_wait(*e->q, e->seq);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t stop)
{
    if (!ms)
        return pp_emu_fail(cudaErrorInvalidValue);
    if (!event_ok(start) || !event_ok(stop) || !start->recorded || !stop->recorded)
        return pp_emu_fail(cudaErrorInvalidResourceHandle);
    *ms = (float)(stop->ms - start->ms);
    return cudaSuccess;
}

static pp_emu_pool emu_pools[EMU_MAX_DEVICES];

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    if (!pool)
        return pp_emu_fail(cudaErrorInvalidValue);
    if (device < 0 || device >= pp_emu_device_count())
        return pp_emu_fail(cudaErrorInvalidDevice);
    emu_pools[device].device = device;
    *pool = &emu_pools[device];
    return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
    if (!pool || !value || attr != cudaMemPoolAttrReleaseThreshold)
        return pp_emu_fail(cudaErrorInvalidValue);
    return cudaSuccess; /* the pool caches nothing here: frees return memory at once */
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep)
{
    (void)keep;
    return pool ? cudaSuccess : pp_emu_fail(cudaErrorInvalidValue);
}
