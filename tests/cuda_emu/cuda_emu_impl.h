/* cuda_emu_impl.h — private to the CUDA emulation (the .cpp files of tests/cuda_emu): helpers the
 * runtime part (cuda_emu.cpp) shares with the kernel scheduler (cuda_emu_kernels.cpp) and cuBLAS
 * (cuda_emu_blas.cpp). */
#ifndef PP_CUDA_EMU_IMPL_H
#define PP_CUDA_EMU_IMPL_H

#include "cuda_runtime.h"

/* EMU_ASAN: this file is built with AddressSanitizer (GCC's and Clang's ways of saying so). */
#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif

/* Prints "cuda_emu: <message>" and aborts: a bug that a GPU would not report cleanly either. */
[[noreturn]] void pp_emu_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Sets the calling thread's last error (cudaGetLastError) and returns e. */
cudaError_t pp_emu_fail(cudaError_t e);
/* Whether [p, p + bytes) lies inside one live device allocation. */
bool pp_emu_in_device_memory(const void *p, size_t bytes);
/* Whether s is NULL (the default stream) or a live stream. */
bool pp_emu_stream_ok(cudaStream_t s);
int pp_emu_device_count(void);
/* Device memory (cuda_emu_arena.cpp): 256-byte aligned blocks of the arena, NULL when it is
 * exhausted; free takes the size the block was allocated with. */
void *pp_emu_arena_alloc(size_t bytes);
void pp_emu_arena_free(void *p, size_t bytes);
/* Around everything of the emulation that touches device memory (kernels, copies, sets, GEMMs):
 * only between these may the calling thread read or write it, where protection keys exist. */
void pp_emu_device_enter(void);
void pp_emu_device_leave(void);
/* Whether host accesses to device memory fault (a protection key was obtained); valid once
 * something has been allocated. */
bool pp_emu_device_protected(void);

/* Asynchronous work on a stream: the one kind the emulation has is an NCCL group (nccl_emu.cpp),
 * whose MPI requests complete when the peer takes part. A stream runs its asynchronous work in
 * the order enqueued: start() when everything before it on the stream has completed, then
 * test() until it says done. Kernels, copies and sets on a stream first wait for its pending
 * work (stream order); cudaStreamSynchronize, cudaEventSynchronize and cudaStreamWaitEvent
 * wait, cudaEventQuery only tests. A wait longer than PP_CUDA_EMU_WAIT_S seconds (default 60)
 * aborts naming the operation (describe()): a deadlock, which a GPU would hang in. */
struct pp_emu_async {
    virtual ~pp_emu_async() = default;
    virtual void start() = 0;
    virtual bool test() = 0; /* never blocks */
    virtual void describe(char *buf, size_t n) const = 0;
};
/* Appends op to s's (NULL: the default stream's) pending work; the stream owns it from now. */
void pp_emu_stream_enqueue(cudaStream_t s, pp_emu_async *op);
/* Waits for everything pending on s (cudaStreamSynchronize without the handle check). */
void pp_emu_stream_drain(cudaStream_t s);

#endif
