/*
 * cudrv - the CUDA driver API, loaded at run time with dlopen("libcuda.so.1").
 *
 * Nothing in kevo links -lcuda: the binary must start, and run its CPU paths, on machines
 * with no GPU or no driver. kevo_cudrv_load resolves every entry point kevo uses through
 * cuGetProcAddress_v2 into a table of typed function pointers; callers write
 *     st = KEVO_CU(d, err, d->cuMemAlloc(&p, n));
 * The member names are the cuda.h names, so cuda.h's version macros (cuMemAlloc ->
 * cuMemAlloc_v2) apply to declaration and call alike, and each pointer has exactly the
 * prototype of the header kevo was built with; the driver is asked for that ABI version.
 *
 * Thread-safety: kevo_cudrv_load runs once per process (pthread_once); the table is
 * read-only after that and lives until exit (the library is never dlclosed).
 */
#ifndef KEVO_CUDRV_H
#define KEVO_CUDRV_H

#include "base/buf.h"
#include "kevo.h"
#include <cuda.h>

/* X-macro list of the driver entry points kevo uses. */
#define KEVO_CUDRV_FUNCS(X)                                                              \
    X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDriverGetVersion)                \
    X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName) X(cuDeviceGetAttribute)        \
    X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)         \
    X(cuCtxSetCurrent) X(cuCtxSetLimit) X(cuCtxResetPersistingL2Cache)                   \
    X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)                          \
    X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)                         \
    X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuFuncGetParamInfo)                   \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                                       \
    X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyHtoDAsync)      \
    X(cuMemcpyDtoDAsync) X(cuMemsetD32Async) X(cuMemsetD8Async)                          \
    X(cuMemHostAlloc) X(cuMemHostGetDevicePointer) X(cuMemFreeHost)                      \
    X(cuLaunchKernel) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)                \
    X(cuEventElapsedTime)                                                                \
    X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease)            \
    X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemGetAllocationGranularity)        \
    X(cuTensorMapEncodeTiled)

#define KEVO_CUDRV_MEMBER(name) __typeof__(name) *name;
struct kevo_cudrv {
    KEVO_CUDRV_FUNCS(KEVO_CUDRV_MEMBER)
    int driver_version;      /* cuDriverGetVersion, e.g. 13000 */
    int abi_version;         /* the version the entry points were requested at */
};
#undef KEVO_CUDRV_MEMBER

/*
 * The process-wide driver table (borrowed; lives until exit). KEVO_ERR_NODEV with a
 * message in *err (may be NULL) when libcuda.so.1 is missing or too old
 * ("no CUDA driver (libcuda.so.1 not found)"); the result is remembered, so later calls
 * answer the same without trying again.
 */
KEVO_NODISCARD enum kevo_status kevo_cudrv_load(const struct kevo_cudrv **out,
                                                struct kevo_buf *err);

/*
 * Map a CUresult to kevo's status (docs/internals/backend_cuda.md):
 *   sticky faults (illegal address, trap, launch failed, ECC, ...) -> KEVO_ERR_DEVICE;
 *   launch refusals (out of resources, invalid image, and INVALID_VALUE when at_launch)
 *                                                                   -> KEVO_ERR_LAUNCH;
 *   no device / driver mismatch                                     -> KEVO_ERR_NODEV;
 *   anything else                                                   -> KEVO_ERR_CUDA.
 * Pure; CUDA_SUCCESS -> KEVO_OK.
 */
enum kevo_status kevo_cudrv_classify(CUresult r, int at_launch);

/* 1 if r leaves the context unusable (the worker must exit). */
int kevo_cudrv_is_sticky(CUresult r);

/*
 * Status of a driver call; on failure appends to *msg (may be NULL)
 *   "CALL: CUDA_ERROR_NAME (description) [code N] at FILE:LINE"
 * d may be NULL (then only the code number is known). Use the macros.
 */
enum kevo_status kevo_cudrv_check(const struct kevo_cudrv *d, CUresult r, int at_launch,
                                  const char *call, const char *file, int line,
                                  struct kevo_buf *msg);
#define KEVO_CU(d, msg, call) \
    kevo_cudrv_check((d), (call), 0, #call, __FILE__, __LINE__, (msg))
#define KEVO_CU_LAUNCH(d, msg, call) \
    kevo_cudrv_check((d), (call), 1, #call, __FILE__, __LINE__, (msg))

/*
 * The NVRTC target for compute capability major.minor: the arch-specific "a" variant
 * where kevo uses its features (9.0 -> "sm_90a", 10.0 -> "sm_100a", 12.0 -> "sm_120a"),
 * else "sm_XY". Writes at most n bytes (NUL included).
 */
void kevo_cudrv_arch_name(int major, int minor, char *out, size_t n);

#endif
