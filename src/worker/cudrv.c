/*
 * cudrv - the CUDA driver API loaded with dlopen, and CUresult -> kevo_status mapping.
 * See cudrv.h for the contract. The loader runs once per process under pthread_once and
 * remembers its outcome (success, or the reason there is no driver), so a machine without
 * a GPU pays one failed dlopen, and the table is immutable afterwards.
 */
#include "worker/cudrv.h"

#include "base/log.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct kevo_cudrv g_drv;
static enum kevo_status g_status = KEVO_ERR_NODEV;
static char g_msg[256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

typedef CUresult (*kevo_getproc_fn)(const char *symbol, void **pfn, int cuda_version,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *found);
typedef CUresult (*kevo_drvver_fn)(int *version);

/* ---- loading ---- */

/* Resolve one entry point by its base name at the ABI version kevo was built for. */
static int resolve(kevo_getproc_fn getproc, const char *name, int version, void **out)
{
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = getproc(name, out, version, CU_GET_PROC_ADDRESS_DEFAULT, &found);

    if (r != CUDA_SUCCESS || found != CU_GET_PROC_ADDRESS_SUCCESS || !*out) {
        snprintf(g_msg, sizeof g_msg,
                 "CUDA driver %d.%d lacks %s (needed at ABI %d); update the driver",
                 version / 1000, version % 1000 / 10, name, version);
        return -1;
    }
    return 0;
}

static void load_once(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    kevo_getproc_fn getproc = NULL;
    kevo_drvver_fn drvver = NULL;
    int version = 0;

    if (!lib) {
        snprintf(g_msg, sizeof g_msg, "no CUDA driver (libcuda.so.1 not found)");
        return;
    }
    /* dlsym returns void *; C11 has no cast from object to function pointer, so copy. */
    void *sym = dlsym(lib, "cuGetProcAddress_v2");
    memcpy(&getproc, &sym, sizeof getproc);
    sym = dlsym(lib, "cuDriverGetVersion");
    memcpy(&drvver, &sym, sizeof drvver);
    if (!getproc || !drvver || drvver(&version) != CUDA_SUCCESS) {
        snprintf(g_msg, sizeof g_msg,
                 "CUDA driver too old: libcuda.so.1 has no cuGetProcAddress_v2 (needs 12.0+)");
        return;
    }
    g_drv.driver_version = version;
    /* Asking for a version above the driver's is an error; below ours gives the ABI the
     * driver has, which for the calls kevo uses is the same prototype. */
    g_drv.abi_version = version < CUDA_VERSION ? version : CUDA_VERSION;

#define KEVO_CUDRV_RESOLVE(name)                                                         \
    if (resolve(getproc, #name, g_drv.abi_version, (void **)&g_drv.name))                \
        return;
    KEVO_CUDRV_FUNCS(KEVO_CUDRV_RESOLVE)
#undef KEVO_CUDRV_RESOLVE

    g_status = KEVO_OK;
}

enum kevo_status kevo_cudrv_load(const struct kevo_cudrv **out, struct kevo_buf *err)
{
    *out = NULL;
    pthread_once(&g_once, load_once);
    if (g_status != KEVO_OK) {
        if (err && kevo_buf_adds(err, g_msg) != KEVO_OK) {
            /* cut at the cap: what fitted is kept */
        }
        return g_status;
    }
    *out = &g_drv;
    return KEVO_OK;
}

/* ---- error classification ---- */

int kevo_cudrv_is_sticky(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_EXTERNAL_DEVICE:
        return 1;
    default:
        return 0;
    }
}

/* Codes that mean "the device refused this launch/binary", a verdict for the candidate. */
static int is_refusal(CUresult r, int at_launch)
{
    switch (r) {
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
    case CUDA_ERROR_INVALID_CLUSTER_SIZE:
    case CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING:
        return 1;
    case CUDA_ERROR_INVALID_VALUE:
        return at_launch;   /* elsewhere it is kevo's own bad call */
    default:
        return 0;
    }
}

static int is_nodev(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_DEVICE_NOT_LICENSED:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_SYSTEM_NOT_READY:
        return 1;
    default:
        return 0;
    }
}

enum kevo_status kevo_cudrv_classify(CUresult r, int at_launch)
{
    if (r == CUDA_SUCCESS)
        return KEVO_OK;
    if (kevo_cudrv_is_sticky(r))
        return KEVO_ERR_DEVICE;
    if (is_refusal(r, at_launch))
        return KEVO_ERR_LAUNCH;
    if (is_nodev(r))
        return KEVO_ERR_NODEV;
    return KEVO_ERR_CUDA;        /* OUT_OF_MEMORY included: device memory, not the host's */
}

enum kevo_status kevo_cudrv_check(const struct kevo_cudrv *d, CUresult r, int at_launch,
                                  const char *call, const char *file, int line,
                                  struct kevo_buf *msg)
{
    const char *name = NULL;
    const char *text = NULL;

    if (r == CUDA_SUCCESS)
        return KEVO_OK;
    if (d && d->cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (d && d->cuGetErrorString(r, &text) != CUDA_SUCCESS)
        text = NULL;
    if (msg && kevo_buf_addf(msg, "%s: %s (%s) [code %d] at %s:%d", call,
                             name ? name : "CUDA_ERROR", text ? text : "no description",
                             (int)r, file, line) != KEVO_OK) {
        /* cut at the cap: what fitted is kept */
    }
    return kevo_cudrv_classify(r, at_launch);
}

/* ---- device naming ---- */

void kevo_cudrv_arch_name(int major, int minor, char *out, size_t n)
{
    /* The "a" targets unlock wgmma/TMA/setmaxnreg (9.0) and tcgen05 (10.0, 12.0); such a
     * cubin runs only on that exact architecture, which is what a worker needs. */
    int arch_specific = (major == 9 && minor == 0) || (major == 10 && minor == 0) ||
                        (major == 12 && minor == 0);

    if (n == 0)
        return;
    snprintf(out, n, "sm_%d%d%s", major, minor, arch_specific ? "a" : "");
}
