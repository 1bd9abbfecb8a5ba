/*
 * coldstate.cu - issue 13 probe (session 10): which state before a latency-bound row kernel
 * makes it run as fast as after Nsight Compute's cache control? On an H200, softmax_fast
 * 4096 x 8192 reads 67.4 us after kevo's cold start (poison the output, read 2 x L2, discard
 * it) and 63.5-64.6 us after ncu's flush, with the same DRAM traffic
 * (bench/results/2026-11-28-h200-ncu-fidelity/README.md, section 2).
 *
 *   coldstate VARIANT [REPS]  runs VARIANT's pre-state (pre(): kevo's cold start and its
 *                             variants, memory given back or remapped, waits, ...) then
 *                             softmax_clocked REPS times, queued behind a blocker, and prints
 *                             the medians of the events around it and of its own
 *                             %globaltimer span; VARIANT "all" runs the list round robin.
 *   COLDSTATE_NOBLOCK=1       no blocker (under ncu, which serializes launches: the blocker
 *                             would wait for a host that ncu holds).
 *   COLDSTATE_CARVEOUT=N      the kernel's preferred shared-memory carveout, %.
 * Results: bench/results/2026-11-28-h200-session10/README.md.
 * Build: nvcc -O2 -arch=sm_90a -cudart static -o coldstate bench/probes/coldstate.cu -lcuda
 */
#define THREADS 512
#define VPT 4
#include "../../examples/seeds/softmax_rows.cu"
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <time.h>
#include <vector>
#include <cuda.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

__global__ void evict(const uint4 *p, unsigned long long n16, unsigned *sink)
{
    unsigned acc = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n16;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        uint4 v = __ldcg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x1E3779B9u)
        *sink = acc;
}

__global__ void discard(char *p, unsigned long long lines)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < lines;
         i += (unsigned long long)gridDim.x * blockDim.x)
        asm volatile("discard.global.L2 [%0], 128;" : : "l"(p + 128 * i) : "memory");
}

__global__ void evict_lu(const uint4 *p, unsigned long long n16, unsigned *sink)
{   /* the same read, last use: ld.global.lu (the line is not kept) */
    unsigned acc = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n16;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        uint4 v = __ldlu(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x1E3779B9u)
        *sink = acc;
}

/* Holds the GPU until the host sets *go, so the events and the kernel are queued before it
 * lets go (no host launch gap inside the events). */
__global__ void blocker(volatile int *go)
{
    while (!*go)
        __nanosleep(500);
}

__device__ __forceinline__ unsigned long long gtimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* softmax_fast with its own clock: t[0] = the first block's start, t[1] = the last block's
 * end (%globaltimer), a clock that owes nothing to the profiler. */
extern "C" __global__ void __launch_bounds__(THREADS)
softmax_clocked(const float *__restrict__ x, float *__restrict__ y, int n, unsigned long long *t)
{
    __shared__ float sh[WARPS];
    if (threadIdx.x == 0)
        atomicMin(&t[0], gtimer());
    row_registers((const float4 *)(x + (long long)blockIdx.x * n),
                  (float4 *)(y + (long long)blockIdx.x * n), n >> 2, sh);
    __syncthreads();
    if (threadIdx.x == 0)
        atomicMax(&t[1], gtimer());
}

/* Device memory of device 0, and read-write access to it, for the driver's VMM calls. */
static CUmemAllocationProp dev_prop()
{
    CUmemAllocationProp p = {};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    return p;
}

static CUmemAccessDesc rw_access()
{
    CUmemAccessDesc a = {};
    a.location = dev_prop().location;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return a;
}

static volatile int *go_h;
static int *go_d;
static CUdeviceptr tva;
static CUmemGenericAllocationHandle th;
static size_t tgran;

/* Unmap and map again a small buffer: the driver invalidates the GPU's TLBs. */
static void remap()
{
    CK(cudaDeviceSynchronize());
    CUmemAccessDesc a = rw_access();
    if (cuMemUnmap(tva, tgran) || cuMemMap(tva, tgran, 0, th, 0) || cuMemSetAccess(tva, tgran, &a, 1)) {
        fprintf(stderr, "remap failed\n");
        exit(1);
    }
}

/* A flush buffer of its own physical memory (2 x L2), to give back and take again. */
static CUdeviceptr vfl;
static CUmemGenericAllocationHandle vfh;
static size_t vfbytes;

static void vf_map()
{
    CUmemAllocationProp p = dev_prop();
    CUmemAccessDesc a = rw_access();
    if (cuMemCreate(&vfh, vfbytes, &p, 0) || cuMemMap(vfl, vfbytes, 0, vfh, 0) ||
        cuMemSetAccess(vfl, vfbytes, &a, 1)) {
        fprintf(stderr, "vf map failed\n");
        exit(1);
    }
}

/* Read the buffer (L2 full of its clean lines), then give its memory back to the driver and
 * map new memory there: does the driver invalidate L2 for memory it takes back? */
static void vf_release()
{
    CK(cudaDeviceSynchronize());
    if (cuMemUnmap(vfl, vfbytes) || cuMemRelease(vfh)) {
        fprintf(stderr, "vf release failed\n");
        exit(1);
    }
    vf_map();
}

/* Give the small block's memory back and take new memory for it. */
static void small_release()
{
    CK(cudaDeviceSynchronize());
    CUmemAllocationProp p = dev_prop();
    CUmemAccessDesc a = rw_access();
    if (cuMemUnmap(tva, tgran) || cuMemRelease(th) || cuMemCreate(&th, tgran, &p, 0) ||
        cuMemMap(tva, tgran, 0, th, 0) || cuMemSetAccess(tva, tgran, &a, 1)) {
        fprintf(stderr, "small release failed\n");
        exit(1);
    }
}

static void settle() { CK(cudaDeviceSynchronize()); usleep(5000); }

static double host_s;   /* host seconds spent in the driver calls under test */
static int host_n;
static double now_s()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int vf_mapped = 1;
static CUdeviceptr vf2;
static CUmemGenericAllocationHandle vf2h;
static int vf2_mapped;

/* The flush buffer's memory given back (the next sample maps new memory first). */
static void vf_give_back()
{
    CK(cudaDeviceSynchronize());
    double t = now_s();
    if (cuMemUnmap(vfl, vfbytes) || cuMemRelease(vfh))
        exit(3);
    host_s += now_s() - t, host_n++;
    vf_mapped = 0;
}

/* New memory of the flush buffer's size mapped at a second address (given back next time). */
static void vf2_take()
{
    CK(cudaDeviceSynchronize());
    CUmemAllocationProp p = dev_prop();
    CUmemAccessDesc a = rw_access();
    if (!vf2 && cuMemAddressReserve(&vf2, vfbytes, 0, 0, 0))
        exit(3);
    double t = now_s();
    if (cuMemCreate(&vf2h, vfbytes, &p, 0) || cuMemMap(vf2, vfbytes, 0, vf2h, 0) ||
        cuMemSetAccess(vf2, vfbytes, &a, 1))
        exit(3);
    host_s += now_s() - t, host_n++;
    vf2_mapped = 1;
}

/* The flush buffer unmapped and mapped again, its memory kept. */
static void vf_remap()
{
    CK(cudaDeviceSynchronize());
    CUmemAccessDesc a = rw_access();
    double t = now_s();
    if (cuMemUnmap(vfl, vfbytes) || cuMemMap(vfl, vfbytes, 0, vfh, 0) ||
        cuMemSetAccess(vfl, vfbytes, &a, 1))
        exit(3);
    host_s += now_s() - t, host_n++;
}

static void vf_restore()
{
    if (!vf_mapped) {
        vf_map();
        vf_mapped = 1;
    }
    if (vf2_mapped) {
        if (cuMemUnmap(vf2, vfbytes) || cuMemRelease(vf2h))
            exit(3);
        vf2_mapped = 0;
    }
}

static float *x, *y, *x2, *y2;
static char *fl;
static unsigned *sink;
static size_t l2, M = 4096, N = 8192;
static int sms;

static void ev(size_t bytes) { evict<<<16 * sms, 256>>>((const uint4 *)fl, bytes / 16, sink); }
static void ds(void *p, size_t bytes) { discard<<<16 * sms, 256>>>((char *)p, bytes / 128); }
static void poison() { CK(cudaMemsetAsync(y, 0xff, M * N * 4)); }

static void pre(const char *v)
{
    if (!strcmp(v, "kevo")) { poison(); ev(2 * l2); ds(fl, 2 * l2); }
    else if (!strcmp(v, "kevo_nopoison")) { ev(2 * l2); ds(fl, 2 * l2); }
    else if (!strcmp(v, "kevo_idle")) { poison(); ev(2 * l2); ds(fl, 2 * l2); CK(cudaDeviceSynchronize()); usleep(2000); }
    else if (!strcmp(v, "kevo_sync")) { poison(); ev(2 * l2); ds(fl, 2 * l2); CK(cudaDeviceSynchronize()); }
    else if (!strcmp(v, "release")) { poison();
        evict<<<16 * sms, 256>>>((const uint4 *)vfl, vfbytes / 16, sink); vf_release(); }
    else if (!strcmp(v, "release_discard")) { poison();
        evict<<<16 * sms, 256>>>((const uint4 *)vfl, vfbytes / 16, sink); ds((void *)vfl, vfbytes); vf_release(); }
    else if (!strcmp(v, "release_wait")) { vf_restore(); poison();
        evict<<<16 * sms, 256>>>((const uint4 *)vfl, vfbytes / 16, sink); vf_release(); settle(); }
    else if (!strcmp(v, "give_back_wait")) { vf_restore(); poison();
        evict<<<16 * sms, 256>>>((const uint4 *)vfl, vfbytes / 16, sink); vf_give_back(); settle(); }
    else if (!strcmp(v, "take_wait")) { vf_restore(); poison();
        evict<<<16 * sms, 256>>>((const uint4 *)vfl, vfbytes / 16, sink); vf2_take(); settle(); }
    else if (!strcmp(v, "remap_flush_wait")) { vf_restore(); poison();
        evict<<<16 * sms, 256>>>((const uint4 *)vfl, vfbytes / 16, sink); vf_remap(); settle(); }
    else if (!strcmp(v, "give_back")) { vf_restore(); poison();
        evict<<<16 * sms, 256>>>((const uint4 *)vfl, vfbytes / 16, sink); vf_give_back(); }
    else if (!strcmp(v, "give_back_sync")) { vf_restore(); poison();
        evict<<<16 * sms, 256>>>((const uint4 *)vfl, vfbytes / 16, sink); vf_give_back();
        CK(cudaDeviceSynchronize()); }
    else if (!strcmp(v, "give_back_200us")) { vf_restore(); poison();
        evict<<<16 * sms, 256>>>((const uint4 *)vfl, vfbytes / 16, sink); vf_give_back();
        CK(cudaDeviceSynchronize()); usleep(200); }
    else if (!strcmp(v, "give_back_1ms")) { vf_restore(); poison();
        evict<<<16 * sms, 256>>>((const uint4 *)vfl, vfbytes / 16, sink); vf_give_back();
        CK(cudaDeviceSynchronize()); usleep(1000); }
    else if (!strcmp(v, "release_sync")) { vf_restore(); poison();
        evict<<<16 * sms, 256>>>((const uint4 *)vfl, vfbytes / 16, sink);
        double t = now_s(); vf_release(); CK(cudaDeviceSynchronize()); host_s += now_s() - t, host_n++; }
    else if (!strcmp(v, "kevo_wait")) { poison(); ev(2 * l2); ds(fl, 2 * l2); settle(); }
    else if (!strcmp(v, "small_release")) { poison(); ev(2 * l2); ds(fl, 2 * l2); small_release(); }
    else if (!strcmp(v, "small_release_wait")) { poison(); ev(2 * l2); ds(fl, 2 * l2); small_release(); settle(); }
    else if (!strcmp(v, "evict_release_wait")) { poison(); ev(2 * l2); small_release(); settle(); }
    else if (!strcmp(v, "kevo_remap")) { poison(); ev(2 * l2); ds(fl, 2 * l2); remap(); }
    else if (!strcmp(v, "kevo_idle_remap")) { poison(); ev(2 * l2); ds(fl, 2 * l2); CK(cudaDeviceSynchronize()); usleep(2000); remap(); }
    else if (!strcmp(v, "evict4x")) { poison(); ev(4 * l2); ds(fl, 4 * l2); }
    else if (!strcmp(v, "evict_only")) { poison(); ev(2 * l2); }
    else if (!strcmp(v, "evict_lu")) { poison(); evict_lu<<<16 * sms, 256>>>((const uint4 *)fl, 2 * l2 / 16, sink); ds(fl, 2 * l2); }
    else if (!strcmp(v, "write_discard")) { poison(); CK(cudaMemsetAsync(fl, 0, 2 * l2)); ds(fl, 2 * l2); }
    else if (!strcmp(v, "discard_y")) { poison(); ds(y, M * N * 4); }
    else if (!strcmp(v, "train")) { poison(); ev(2 * l2); ds(fl, 2 * l2);
        softmax_fast<<<M / 8, THREADS>>>(x2, y2, (int)N); ds(y2, M / 8 * N * 4); ds(x2, M / 8 * N * 4); }
    else if (!strcmp(v, "none")) { }
    else if (!strcmp(v, "warm_x")) { poison(); ev(2 * l2); ds(fl, 2 * l2);
        evict<<<16 * sms, 256>>>((const uint4 *)x, l2 / 2 / 16, sink); }
    else { fprintf(stderr, "unknown variant %s\n", v); exit(2); }
}

static const char *variants[] = {"kevo", "kevo_nopoison", "kevo_idle", "kevo_sync", "kevo_remap", "kevo_idle_remap", "release", "release_discard", "release_wait", "kevo_wait", "small_release", "small_release_wait", "evict_release_wait", "evict4x", "evict_only",
                            "evict_lu", "write_discard", "discard_y", "train", "none", "warm_x"};

int main(int argc, char **argv)
{
    const char *v = argc > 1 ? argv[1] : "all";
    int reps = argc > 2 ? atoi(argv[2]) : 30;
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    l2 = pr.l2CacheSize; sms = pr.multiProcessorCount;
    CK(cudaMalloc(&x, M * N * 4)); CK(cudaMalloc(&y, M * N * 4));
    CK(cudaMalloc(&x2, M * N * 4)); CK(cudaMalloc(&y2, M * N * 4));
    CK(cudaMalloc(&fl, 4 * l2)); CK(cudaMalloc(&sink, 4));
    CK(cudaMemset(fl, 0, 4 * l2));
    {
        CUmemAllocationProp p = dev_prop();
        size_t g = 0;
        if (cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM))
            return 1;
        vfbytes = (2 * l2 + g - 1) / g * g;
        if (cuMemAddressReserve(&vfl, vfbytes, 0, 0, 0))
            return 1;
        vf_map();
    }
    CK(cudaHostAlloc((void **)&go_h, 4, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&go_d, (void *)go_h, 0));
    {
        CUmemAllocationProp p = dev_prop();
        if (cuMemGetAllocationGranularity(&tgran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ||
            cuMemCreate(&th, tgran, &p, 0) || cuMemAddressReserve(&tva, tgran, 0, 0, 0)) {
            fprintf(stderr, "vmm failed\n");
            return 1;
        }
        CUmemAccessDesc a = rw_access();
        if (cuMemMap(tva, tgran, 0, th, 0) || cuMemSetAccess(tva, tgran, &a, 1)) {
            fprintf(stderr, "vmm map failed\n");
            return 1;
        }
    }
    std::vector<float> h(M * N);
    for (size_t i = 0; i < h.size(); i++) h[i] = (float)((i * 2654435761u) % 1000) / 100.f - 5.f;
    CK(cudaMemcpy(x, h.data(), M * N * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(x2, h.data(), M * N * 4, cudaMemcpyHostToDevice));
    const int noblock = getenv("COLDSTATE_NOBLOCK") != NULL;   /* under ncu: it serializes */
    if (getenv("COLDSTATE_CARVEOUT"))   /* the kernel's preferred shared-memory carveout, % */
        CK(cudaFuncSetAttribute(softmax_clocked, cudaFuncAttributePreferredSharedMemoryCarveout,
                                atoi(getenv("COLDSTATE_CARVEOUT"))));
    unsigned long long *tk, tinit[2] = {~0ull, 0};
    CK(cudaMalloc(&tk, 16));
    std::vector<std::vector<float>> in(strcmp(v, "all") ? 1 : (int)(sizeof variants / sizeof *variants));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    int nv = strcmp(v, "all") ? 1 : (int)(sizeof variants / sizeof *variants);
    std::vector<std::vector<float>> t(nv);
    for (int r = 0; r < reps + 2; r++)
        for (int k = 0; k < nv; k++) {
            const char *name = nv == 1 ? v : variants[k];
            CK(cudaMemcpy(tk, tinit, 16, cudaMemcpyHostToDevice));
            pre(name);
            *go_h = 0;
            if (!noblock)
                blocker<<<1, 1>>>(go_d);
            CK(cudaEventRecord(e0));
            softmax_clocked<<<M, THREADS>>>(x, y, (int)N, tk);
            CK(cudaEventRecord(e1));
            __sync_synchronize();
            *go_h = 1;
            CK(cudaEventSynchronize(e1));
            unsigned long long th[2];
            CK(cudaMemcpy(th, tk, 16, cudaMemcpyDeviceToHost));
            if (r >= 2) in[k].push_back((float)(th[1] - th[0]) * 1e-3f);
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (r >= 2) t[k].push_back(ms * 1e3f);
        }
    for (int k = 0; k < nv; k++) {
        std::sort(t[k].begin(), t[k].end());
        std::sort(in[k].begin(), in[k].end());
        if (host_n)
            printf("(driver calls under test: %.1f us each on the host, %d calls)\n",
                   host_s / host_n * 1e6, host_n);
        printf("%-14s events median %.2f us (min %.2f max %.2f)  in-kernel %%globaltimer median %.2f us"
               "  (%s; %d reps)\n", nv == 1 ? v : variants[k], t[k][t[k].size() / 2], t[k][0],
               t[k].back(), in[k][in[k].size() / 2],
               noblock ? "no blocker" : "queued behind a blocker", reps);
    }
    return 0;
}
