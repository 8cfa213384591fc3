/* cuda_emu_kernels.cpp — the CUDA emulation's kernel launches (tests only; what the emulation is
 * and is not: cuda_emu.cpp).
 *
 * A launch runs its blocks one after another on the launching OS thread. A block's threads are
 * cooperative fibers on a reused pool of stacks (64 KiB each, 256 KiB under ASan, a guard page
 * below): one fiber starts threads one after another and runs each to its end; a thread that
 * stops at a barrier keeps its fiber, and the next thread starts on another. A block whose threads
 * meet no barrier thus costs two context switches in all; one up to 1024 threads that all wait
 * at a __syncthreads holds that many fibers.
 *   __syncthreads(): completes when every thread of the block has arrived at the same one (same
 *     file:line; a thread at another one aborts: a divergent barrier).
 *   __shfl_xor_sync(mask, v, o): the lane writes v to its slot, the warp meets, the lane reads
 *     its partner's slot. Slots alternate between two buffers from one exchange to the next, so
 *     one meeting suffices: a lane can only overwrite a buffer two exchanges later, after every
 *     lane has met again, hence read. Whole-warp masks only.
 *   Deadlock: when no fiber can run and not every thread has exited (a thread left while others
 *     wait, or they wait at different barriers), abort naming the kernel, the block and who
 *     waits where. All this state is thread_local: each pipeline rank's OS thread launches its
 *     own kernels, and __shared__ (static thread_local) memory is per OS thread likewise.
 * Order: threads start in increasing linear index, blocks run in increasing linear index; with
 * PP_CUDA_EMU_ORDER=reverse both go the other way (the suite cuda_emu_reverse), so that a read
 * of another thread's (or block's) write that no barrier orders shows up in one order or the
 * other as a wrong result. Races that both orders hide stay hidden.
 * Context switches: on x86-64 a few lines of assembly (callee-saved registers, the SSE and x87
 * control words, the stack pointer), since glibc's swapcontext makes a sigprocmask system call
 * at every switch and that dominated the suite's run time; elsewhere makecontext/swapcontext.
 * Under AddressSanitizer every switch is announced (__sanitizer_start/finish_switch_fiber).
 */
#include "cuda_emu_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <deque>
#include <vector>

#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__) && !defined(PP_CUDA_EMU_UCONTEXT)
#define EMU_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

namespace
{
#ifdef EMU_ASAN
const size_t FIBER_STACK = 256 << 10; /* ASan's redzones make frames larger */
#else
const size_t FIBER_STACK = 64 << 10;
#endif
enum { MAX_THREADS = 1024, WARP = 32 };

#ifdef EMU_ASM_SWITCH
typedef void *context; /* the saved stack pointer; everything else is on that stack */
#else
typedef ucontext_t context;
#endif

struct fiber {
    context ctx;
    char *map;            /* the mapping: a guard page, then the stack */
    char *stack;          /* lowest usable address */
    int tid = -1;         /* the block's thread it runs (linear index), -1 between threads */
    unsigned shfl = 0;    /* exchanges of that thread so far (selects the slot buffer) */
    void *fake = nullptr; /* ASan's fake stack of this fiber while switched out */
};

struct barrier {
    int arrived = 0;
    const char *file = nullptr; /* where the first thread arrived (__syncthreads only) */
    int line = 0;
    std::vector<fiber *> waiters;
};

/* One per OS thread: the kernel it runs now, the block, the fibers. */
struct scheduler {
    context main_ctx;
    const void *main_bottom = nullptr; /* the OS thread's own stack, for ASan */
    size_t main_size = 0;
    std::vector<fiber *> fibers, idle;
    fiber *current = nullptr;
    bool in_kernel = false;
    const char *kernel = nullptr;
    void (*body)(void *) = nullptr;
    void *arg = nullptr;
    int nthreads = 0, next_thread = 0, exited = 0;
    bool reverse = false; /* PP_CUDA_EMU_ORDER=reverse: threads and blocks last to first */
    std::deque<fiber *> runnable;
    barrier block;
    barrier warp[MAX_THREADS / WARP];
    uint64_t slot[2][MAX_THREADS]; /* a value per thread for warp exchanges, two buffers */

    ~scheduler()
    {
        for (fiber *f : fibers) {
            munmap(f->map, FIBER_STACK + (size_t)sysconf(_SC_PAGESIZE));
            delete f;
        }
    }
};
thread_local scheduler S;
} // namespace

#ifdef EMU_ASM_SWITCH
/* pp_emu_switch(save, to): pushes the callee-saved registers and the control words, stores the
 * stack pointer in *save, loads `to` and pops the same from there (System V x86-64 ABI). */
extern "C" void pp_emu_switch(void **save, void *to);
__asm__(".text\n"
        ".globl pp_emu_switch\n"
        ".type pp_emu_switch,@function\n"
        "pp_emu_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size pp_emu_switch, .-pp_emu_switch\n"
        ".section .note.GNU-stack,\"\",@progbits\n"
        ".text\n");

static void ctx_swap(context *save, context *to)
{
    pp_emu_switch(save, *to);
}

/* A fresh stack that pp_emu_switch "returns" into entry, as if entry had just been called. */
static void ctx_make(context *c, char *stack, size_t size, void (*entry)(void))
{
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)top;
    *--sp = 0;                  /* entry's return address: it never returns */
    *--sp = (uintptr_t)entry;   /* popped by ret */
    for (int i = 0; i < 6; i++) /* rbp, rbx, r12-r15 */
        *--sp = 0;
    uint32_t mxcsr;
    uint16_t fpucw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fpucw));
    *--sp = (uint64_t)mxcsr | (uint64_t)fpucw << 32;
    *c = sp;
}
#else
static void ctx_swap(context *save, context *to)
{
    swapcontext(save, to);
}

static void ctx_make(context *c, char *stack, size_t size, void (*entry)(void))
{
    getcontext(c);
    c->uc_stack.ss_sp = stack;
    c->uc_stack.ss_size = size;
    c->uc_link = nullptr; /* entry never returns */
    makecontext(c, entry, 0);
}
#endif

static void set_thread(int t)
{
    unsigned u = (unsigned)t;
    threadIdx.x = u % blockDim.x;
    threadIdx.y = u / blockDim.x % blockDim.y;
    threadIdx.z = u / (blockDim.x * blockDim.y);
}

/* Fiber -> the OS thread's own context; returns when the scheduler resumes this fiber. */
static void to_scheduler(fiber *f)
{
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(&f->fake, S.main_bottom, S.main_size);
#endif
    ctx_swap(&f->ctx, &S.main_ctx);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(f->fake, &S.main_bottom, &S.main_size);
#endif
}

/* Scheduler -> fiber f, until f stops at a barrier or runs out of threads to start. */
static void resume(fiber *f)
{
    S.current = f;
#ifdef EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, f->stack, FIBER_STACK);
#endif
    ctx_swap(&S.main_ctx, &f->ctx);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    S.current = nullptr;
}

/* A fiber's life: start the block's next threads one after another, running each to its end
 * (or to a barrier, where it switches out and keeps this fiber); idle when none is left. */
static void fiber_main(void)
{
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &S.main_bottom, &S.main_size);
#endif
    fiber *f = S.current;
    for (;;) {
        while (S.next_thread < S.nthreads) {
            int k = S.next_thread++;
            f->tid = S.reverse ? S.nthreads - 1 - k : k;
            f->shfl = 0;
            set_thread(f->tid);
            S.body(S.arg);
            f->tid = -1;
            S.exited++;
        }
        S.idle.push_back(f);
        to_scheduler(f);
    }
}

static fiber *idle_fiber(void)
{
    if (!S.idle.empty()) {
        fiber *f = S.idle.back();
        S.idle.pop_back();
        return f;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    fiber *f = new fiber;
    f->map = (char *)mmap(nullptr, FIBER_STACK + page, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (f->map == MAP_FAILED)
        pp_emu_die("cannot map a fiber stack of %zu bytes (%zu fibers live)", FIBER_STACK,
                   S.fibers.size());
    mprotect(f->map, page, PROT_NONE); /* a stack overflow faults instead of corrupting */
    f->stack = f->map + page;
#ifdef EMU_ASAN
    /* the mapping may reuse the addresses of an exited thread's stack, whose redzones ASan's
     * shadow memory still marks */
    ASAN_UNPOISON_MEMORY_REGION(f->stack, FIBER_STACK);
#endif
    ctx_make(&f->ctx, f->stack, FIBER_STACK, fiber_main);
    S.fibers.push_back(f);
    return f;
}

static void release(barrier &b)
{
    for (fiber *w : b.waiters)
        S.runnable.push_back(w);
    b.waiters.clear();
    b.arrived = 0;
    b.file = nullptr;
}

/* The calling thread arrives at b, which completes when `expect` threads have arrived. */
static void arrive(barrier &b, int expect)
{
    fiber *f = S.current;
    if (++b.arrived == expect) {
        release(b); /* the others run again later; this one goes on at once */
        return;
    }
    b.waiters.push_back(f);
    to_scheduler(f);
    S.current = f;
    set_thread(f->tid);
}

static fiber *in_kernel(const char *what)
{
    if (!S.in_kernel || !S.current || S.current->tid < 0)
        pp_emu_die("%s called outside a kernel", what);
    return S.current;
}

void pp_emu_syncthreads(const char *file, int line)
{
    fiber *f = in_kernel("__syncthreads");
    barrier &b = S.block;
    if (b.arrived == 0) {
        b.file = file;
        b.line = line;
    } else if (b.line != line || strcmp(b.file, file) != 0) {
        pp_emu_die("kernel %s, block (%u,%u,%u): thread %d reached __syncthreads at %s:%d while "
                   "%d thread(s) wait at the one at %s:%d (a divergent barrier: undefined on a "
                   "GPU)",
                   S.kernel, blockIdx.x, blockIdx.y, blockIdx.z, f->tid, file, line, b.arrived,
                   b.file, b.line);
    }
    arrive(b, S.nthreads);
}

uint64_t pp_emu_shfl_xor(unsigned mask, uint64_t bits, int lane_mask)
{
    fiber *f = in_kernel("__shfl_xor_sync");
    int t = f->tid, w = t / WARP, lane = t % WARP;
    int width = S.nthreads - w * WARP < WARP ? S.nthreads - w * WARP : WARP;
    unsigned full = width == WARP ? 0xffffffffu : (1u << width) - 1u;
    if (mask != full)
        pp_emu_die("kernel %s: __shfl_xor_sync with mask %#x in a warp of %d threads (mask %#x): "
                   "the emulation supports whole-warp exchanges only",
                   S.kernel, mask, width, full);
    int src = lane ^ lane_mask;
    if (src < 0 || src >= width)
        pp_emu_die("kernel %s: __shfl_xor_sync(lane mask %d) from lane %d reads lane %d of a warp "
                   "of %d threads (undefined on a GPU)",
                   S.kernel, lane_mask, lane, src, width);
    uint64_t *slot = S.slot[f->shfl++ & 1u];
    slot[t] = bits;
    arrive(S.warp[w], width);
    return slot[w * WARP + src];
}

[[noreturn]] static void deadlock(void)
{
    int at_warp = 0;
    for (const barrier &b : S.warp)
        at_warp += b.arrived;
    char where[256] = "";
    if (S.block.arrived)
        snprintf(where, sizeof where, " (%s:%d)", S.block.file, S.block.line);
    pp_emu_die("kernel %s, block (%u,%u,%u) of (%u,%u,%u), %d threads: deadlock: %d thread(s) "
               "wait at __syncthreads%s, %d at a warp exchange (__shfl_xor_sync), %d exited: a "
               "barrier that not every thread of its block (or warp) reaches never completes",
               S.kernel, blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y, gridDim.z,
               S.nthreads, S.block.arrived, where, at_warp, S.exited);
}

static void run_block(void)
{
    S.next_thread = 0;
    S.exited = 0;
    for (;;) {
        fiber *f;
        if (!S.runnable.empty()) {
            f = S.runnable.front();
            S.runnable.pop_front();
        } else if (S.next_thread < S.nthreads) {
            f = idle_fiber();
        } else {
            break;
        }
        resume(f);
    }
    if (S.exited != S.nthreads)
        deadlock();
}

static bool config_ok(dim3 g, dim3 b, size_t smem)
{
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    return g.x >= 1 && g.y >= 1 && g.z >= 1 && g.x <= 0x7fffffffu && g.y <= 65535 && g.z <= 65535 &&
           b.x >= 1 && b.y >= 1 && b.z >= 1 && b.x <= 1024 && b.y <= 1024 && b.z <= 64 &&
           threads <= MAX_THREADS && smem <= 48 * 1024;
}

void pp_emu_launch(const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                   void (*body)(void *), void *arg)
{
    if (S.in_kernel)
        pp_emu_die("kernel %s launched from inside kernel %s", name, S.kernel);
    if (!config_ok(grid, block, smem)) {
        pp_emu_fail(cudaErrorInvalidConfiguration);
        return;
    }
    if (!pp_emu_stream_ok(s)) {
        pp_emu_fail(cudaErrorInvalidResourceHandle);
        return;
    }
    pp_emu_stream_drain(s); /* after the stream's pending NCCL work (stream order) */
    const char *order = getenv("PP_CUDA_EMU_ORDER");
    S.reverse = order && strcmp(order, "reverse") == 0;
    S.in_kernel = true;
    S.kernel = name;
    S.body = body;
    S.arg = arg;
    S.nthreads = (int)(block.x * block.y * block.z);
    gridDim = grid;
    blockDim = block;
    pp_emu_device_enter();
    unsigned long long nb = (unsigned long long)grid.x * grid.y * grid.z;
    for (unsigned long long i = 0; i < nb; i++) {
        unsigned long long b = S.reverse ? nb - 1 - i : i;
        blockIdx = uint3{(unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                         (unsigned)(b / ((unsigned long long)grid.x * grid.y))};
        run_block();
    }
    pp_emu_device_leave();
    S.in_kernel = false;
    S.kernel = nullptr;
}
