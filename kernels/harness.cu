/*
 * harness.cu - the device half of kevo's timing protocol (docs/internals/backend_cuda.md,
 * ../shared/reference/timing.md section 1.3/1.9). Compiled at run time with NVRTC by
 * backend_cuda (embedded as build/gen/harness.cu.inc), once per backend open.
 *
 *   kevo_harness_block      one thread that spins until the host sets *release, so every
 *                           launch of a timed sample is queued before the GPU starts it
 *                           (host launch latency stays out of the timed region). It gives
 *                           up after timeout_ns of %globaltimer and sets *timed_out, so a
 *                           host that never releases cannot hang the stream.
 *   kevo_harness_timestamp  launched over many blocks; the one that lands on SM 0 records
 *                           %globaltimer (ns) and clock64 (SM cycles). Two of them around a
 *                           sample give the SM clock: dclock / dglobaltimer.
 *
 * Stand-alone check: nvcc -arch=sm_90a -cubin kernels/harness.cu -o /tmp/harness.cubin
 * Variants: none. Both kernels are extern "C" so the host finds them by these names.
 */

__device__ __forceinline__ unsigned long long kevo_globaltimer(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ unsigned int kevo_smid(void)
{
    unsigned int id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

/* release and timed_out live in host-mapped memory; volatile keeps every read a real
 * load across PCIe, which is what makes the host's store visible to the loop. */
extern "C" __global__ void kevo_harness_block(const volatile int *release,
                                              volatile int *timed_out,
                                              unsigned long long timeout_ns)
{
    const unsigned long long t0 = kevo_globaltimer();

    while (*release == 0) {
        if (kevo_globaltimer() - t0 > timeout_ns) {
            *timed_out = 1;
            break;
        }
        /* Back off a little: fewer PCIe reads, and the release latency is not timed. */
        __nanosleep(500);
    }
}

/* out[0] = %globaltimer, out[1] = clock64, written by thread 0 of a block on SM 0. The
 * grid is several times the SM count so that some block lands on SM 0; the host clears
 * out[] first and treats zeros as "clock unknown". */
extern "C" __global__ void kevo_harness_timestamp(volatile unsigned long long *out)
{
    if (threadIdx.x != 0 || kevo_smid() != 0)
        return;
    const unsigned long long clk = clock64();
    const unsigned long long gt = kevo_globaltimer();
    out[0] = gt;
    out[1] = clk;
}
