/* cuda_emu_impl.h — private to the CUDA emulation (the .cpp files of tests/cuda_emu): helpers the
 * runtime part (cuda_emu.cpp) shares with the kernel scheduler (cuda_emu_kernels.cpp) and cuBLAS
 * (cuda_emu_blas.cpp). */
#ifndef PP_CUDA_EMU_IMPL_H
#define PP_CUDA_EMU_IMPL_H

#include "cuda_runtime.h"

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

#endif
