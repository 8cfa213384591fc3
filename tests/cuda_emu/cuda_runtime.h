/* cuda_runtime.h — the CPU emulation's stand-in for the CUDA runtime header (tests only).
 *
 * Found before the toolkit's when the CUDA backend's .cu files are compiled as host C++ with
 * PP_CUDA_EMU defined (CMake target pp_runtime_emu, ctest suite cuda_emu). It declares only what
 * runtime/cuda/{backend_cuda,kernels_cuda,attention_cuda,weights_bf16}.cu use; the definitions
 * and what the emulation does and does not model are in cuda_emu.cpp. This checks the backend's
 * logic on the CPU; it says nothing about its behaviour on a GPU.
 */
#ifndef PP_CUDA_EMU_RUNTIME_H
#define PP_CUDA_EMU_RUNTIME_H

#ifndef __cplusplus
#error "the CUDA emulation is C++ (the .cu files are compiled as C++17)"
#endif

#include <math.h> /* the real header brings the math functions (fmaxf, expf...) in */
#include <stddef.h>
#include <stdint.h>

#include <tuple>

/* ---- qualifiers: every function is a host function; __shared__ is per OS thread (the blocks of
 * one launch run one after another on the launching thread, and each pipeline rank's thread
 * launches its own kernels at the same time as the others) ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __shared__ static thread_local

/* ---- vector types ---- */
struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct alignas(16) float4 {
    float x, y, z, w;
};

/* Set by the emulated scheduler before a thread of a kernel runs or resumes. Inline definitions,
 * not extern declarations: an extern thread_local of class type is reached through a TLS
 * wrapper, and GCC's -fsanitize=null check after that wrapper tests stale flags when there is no
 * initialiser to call (the wrapper's call is skipped): every kernel reading blockDim aborted
 * with "member access within null pointer" in the sanitizer build. Seen here visible as
 * constant-initialised, they are plain %fs accesses. */
inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;

/* ---- errors ---- */
enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
};
typedef enum cudaError cudaError_t;
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);

/* ---- devices ---- */
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    int multiProcessorCount;
    int maxThreadsPerBlock;
    int warpSize;
    int major, minor;
};
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

/* ---- streams, events, pools (opaque handles; streams execute at once, in call order) ---- */
typedef struct pp_emu_stream *cudaStream_t;
typedef struct pp_emu_event *cudaEvent_t;
typedef struct pp_emu_pool *cudaMemPool_t;
#define cudaStreamNonBlocking 0x01u
enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold = 4 };
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t stop);
/* Asynchronous work (the NCCL emulation's operations, tests/cuda_emu/nccl_emu.cpp) is the one
 * thing a stream can hold unfinished: an event recorded after it is not ready until it
 * completes; everything else has finished when its call returns. */
#define cudaEventDefault 0x00u
#define cudaEventDisableTiming 0x02u
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value);
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep);

/* ---- memory: host memory standing in for device memory; copies and sets happen at once ---- */
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s);
cudaError_t cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s);
/* page-locked host memory: host memory here too, told apart by cudaPointerGetAttributes */
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3,
};
struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
    void *devicePointer;
    void *hostPointer;
};
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attr, const void *p);

/* ---- device intrinsics used by the kernels ---- */
/* Block barrier. Every thread of the block must reach the same __syncthreads (the same line);
 * otherwise the emulator aborts, naming the kernel. */
#define __syncthreads() pp_emu_syncthreads(__FILE__, __LINE__)
void pp_emu_syncthreads(const char *file, int line);
/* Warp exchange: lane writes v, the warp meets, the lane reads its partner's slot, the warp meets
 * again (so no lane overwrites a slot another lane has yet to read). */
uint64_t pp_emu_shfl_xor(unsigned mask, uint64_t bits, int lane_mask);
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask)
{
    static_assert(sizeof(T) <= sizeof(uint64_t), "__shfl_xor_sync: 8 bytes at most");
    uint64_t b = 0;
    __builtin_memcpy(&b, &v, sizeof v);
    b = pp_emu_shfl_xor(mask, b, lane_mask);
    T r;
    __builtin_memcpy(&r, &b, sizeof r);
    return r;
}

/* ---- kernel launches: PP_LAUNCH(k, grid, block, smem, stream)(args) in cuda_impl.h ---- */
/* Runs body(arg) once per thread of every block of the grid; sets the error cudaGetLastError
 * reports when the configuration is invalid (as a real launch would), and then runs nothing. */
void pp_emu_launch(const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                   void (*body)(void *), void *arg);

template <typename... P> struct pp_emu_launch_of {
    const char *name;
    void (*kernel)(P...);
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    /* The arguments, converted to the kernel's parameter types at the call as a launch does
     * (NULL to a pointer included), are copied once; every thread gets copies of those. */
    void operator()(P... a) const
    {
        struct call {
            void (*kernel)(P...);
            std::tuple<P...> args;
        } c{kernel, std::tuple<P...>(a...)};
        pp_emu_launch(
            name, grid, block, smem, stream,
            [](void *p) {
                call *k = static_cast<call *>(p);
                std::apply(k->kernel, k->args);
            },
            &c);
    }
};

template <typename... P>
static inline pp_emu_launch_of<P...> pp_emu_launcher(const char *name, void (*kernel)(P...),
                                                     dim3 grid, dim3 block, size_t smem,
                                                     cudaStream_t s)
{
    return pp_emu_launch_of<P...>{name, kernel, grid, block, smem, s};
}

#endif
