/* cuda_emu_arena.cpp — the CUDA emulation's device memory (tests only; what the emulation is and
 * is not: cuda_emu.cpp): one large reserved mapping that cudaMalloc carves into blocks, so that
 * host code touching device memory can be caught, as it would fault on a GPU.
 *
 * Protection: where the CPU and kernel offer memory protection keys (x86 PKU: pkey_alloc), the
 * arena gets its own key, and each OS thread may access it only while it is "on the device":
 * running a kernel, a copy or set, or a GEMM of the emulation (pp_emu_device_enter/leave, a
 * per-thread register write, so threads do not disturb one another). Anywhere else a read or
 * write of device memory faults (SIGSEGV, si_code SEGV_PKUERR), with a line saying so, exactly
 * where the host code did it. Without PKU (or with PP_CUDA_EMU_PROTECT=0) device memory is
 * plain host memory and such accesses pass unnoticed.
 * Under ASan: free blocks and a 256-byte redzone after each block are poisoned, so a kernel
 * reading past its buffer is reported as with malloc; memory never handed out is not poisoned.
 * Blocks are 256-byte aligned (as cudaMalloc's), reused first-fit, merged when freed.
 */
#include "cuda_emu_impl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>

#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#define EMU_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define EMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define EMU_POISON(p, n) ((void)(p), (void)(n))
#define EMU_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace
{
size_t arena_bytes = (size_t)1 << 40; /* reserved, not committed: 1 TiB of addresses (less
                                       * where the system refuses that much) */
const size_t ALIGN = 256, REDZONE = 256;

std::mutex arena_mu;
char *arena;                        /* NULL until the first allocation */
size_t arena_top;                   /* bytes handed out from the start at least once */
std::map<size_t, size_t> free_list; /* offset -> bytes of free blocks below arena_top, merged */
int pkey = -1;                      /* the arena's protection key, -1: none */
thread_local int depth;             /* nesting of pp_emu_device_enter on this thread */
struct sigaction old_segv;

void on_segv(int sig, siginfo_t *si, void *uc)
{
    const char *a = (const char *)si->si_addr;
    if (arena && a >= arena && a < arena + arena_bytes) {
        static const char msg[] = "cuda_emu: host code read or wrote device memory (outside "
                                  "kernels, copies and GEMMs): a fault on a GPU too\n";
        (void)!write(2, msg, sizeof msg - 1);
    }
    /* let the previous handler (or the default action) deal with the fault */
    sigaction(SIGSEGV, &old_segv, nullptr);
    (void)sig, (void)uc;
}

void arena_init(void)
{
    for (;;) {
        arena = (char *)mmap(nullptr, arena_bytes, PROT_NONE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (arena != MAP_FAILED || arena_bytes <= ((size_t)1 << 30))
            break;
        arena_bytes /= 2;
    }
    if (arena == MAP_FAILED)
        pp_emu_die("cannot reserve %zu bytes of addresses for device memory", arena_bytes);
    const char *env = getenv("PP_CUDA_EMU_PROTECT");
    bool protect = !(env && strcmp(env, "0") == 0);
    if (protect)
        pkey = pkey_alloc(0, PKEY_DISABLE_ACCESS); /* -1 without PKU: no protection */
    if (pkey >= 0 ? pkey_mprotect(arena, arena_bytes, PROT_READ | PROT_WRITE, pkey) != 0
                  : mprotect(arena, arena_bytes, PROT_READ | PROT_WRITE) != 0)
        pp_emu_die("cannot make the device memory arena accessible");
    if (pkey >= 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &old_segv);
    }
}
} // namespace

/* Other threads start with the key's access disabled (Linux's initial PKRU denies every key but
 * the default one), and threads inherit their creator's rights; the creator of a thread is never
 * inside a device call when it creates one. */
void pp_emu_device_enter(void)
{
    if (pkey >= 0 && depth++ == 0)
        pkey_set(pkey, 0);
}

void pp_emu_device_leave(void)
{
    if (pkey >= 0 && --depth == 0)
        pkey_set(pkey, PKEY_DISABLE_ACCESS);
}

bool pp_emu_device_protected(void)
{
    return pkey >= 0;
}

void *pp_emu_arena_alloc(size_t bytes)
{
    size_t need = (bytes + ALIGN - 1) / ALIGN * ALIGN + REDZONE;
    char *p = nullptr;
    {
        std::lock_guard<std::mutex> g(arena_mu);
        if (!arena)
            arena_init();
        for (auto it = free_list.begin(); it != free_list.end(); ++it)
            if (it->second >= need) {
                size_t off = it->first, left = it->second - need;
                free_list.erase(it);
                if (left)
                    free_list[off + need] = left;
                p = arena + off;
                break;
            }
        if (!p) {
            if (need > arena_bytes - arena_top)
                return nullptr;
            p = arena + arena_top;
            arena_top += need;
        }
    }
    EMU_UNPOISON(p, bytes);
    EMU_POISON(p + bytes, need - bytes);
    return p;
}

void pp_emu_arena_free(void *p, size_t bytes)
{
    size_t need = (bytes + ALIGN - 1) / ALIGN * ALIGN + REDZONE;
    EMU_POISON(p, need);
    std::lock_guard<std::mutex> g(arena_mu);
    size_t off = (size_t)((char *)p - arena);
    auto next = free_list.lower_bound(off);
    if (next != free_list.end() && next->first == off + need) { /* merge with the block after */
        need += next->second;
        next = free_list.erase(next);
    }
    if (next != free_list.begin()) { /* and with the one before */
        auto prev = std::prev(next);
        if (prev->first + prev->second == off) {
            prev->second += need;
            return;
        }
    }
    free_list[off] = need;
}
