/*
 * harness.cu - the device half of kevo's timing protocol (docs/internals/backend_cuda.md,
 * docs/harness.md "Timing"). Compiled at run time with NVRTC by
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
 *   kevo_harness_evict      reads a buffer of 2 x L2, so L2 ends up holding its clean lines:
 *                           whatever was cached before, dirty lines included, is written back
 *                           and evicted now, not during the timed kernel that follows.
 *   kevo_harness_discard    then drops those clean lines: an L2 of invalid lines.
 *   kevo_harness_icache     before both: code that overflows the SMs' instruction caches.
 *
 * Stand-alone check: nvcc -arch=sm_90a -cubin kernels/harness.cu -o /tmp/harness.cubin
 * Variants: none. Every kernel is extern "C" so the host finds it by its name.
 * The verification kernels (second half) also build on the host, with KEVO_HARNESS_ON_HOST
 * and tests/emul/cuda_host.h standing in for CUDA: make test runs them there against
 * src/verify.c (tests/emul/harness_emul.cpp), so a machine without a GPU checks their logic.
 */

#ifndef KEVO_HARNESS_ON_HOST   /* the timing kernels need the GPU's special registers */

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

/* Read n16 16-byte words at p through L2 (ld.global.cg). A zeroing memset would flush as
 * well, but it leaves L2 full of dirty lines, and the timed kernel would pay for writing
 * them back (+4-8% on large memory-bound kernels, more on small ones, against ncu's
 * invalidated caches). The XOR only reaches *sink if it equals key, which the caller makes
 * impossible in practice, so the loads cannot be optimised away and nothing is written. */
extern "C" __global__ void kevo_harness_evict(const uint4 *p, unsigned long long n16,
                                              unsigned int *sink, unsigned int key)
{
    unsigned int acc = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < n16; i += (unsigned long long)gridDim.x * blockDim.x) {
        const uint4 v = __ldcg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == key)
        *sink = acc;
}

/* After kevo_harness_evict: drop the buffer's lines from L2 without writing them back
 * (discard.global.L2, sm_80+), so the timed kernel starts with an L2 of invalid lines, as
 * after Nsight Compute's cache invalidation, not one full of clean lines to replace. The
 * buffer's contents become undefined; kevo never reads them for anything but eviction. */
extern "C" __global__ void kevo_harness_discard(char *p, unsigned long long lines)
{
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < lines; i += (unsigned long long)gridDim.x * blockDim.x)
        asm volatile("discard.global.L2 [%0], 128;" : : "l"(p + 128 * i) : "memory");
}

/* Before kevo_harness_evict: straight-line code larger than an SM's instruction caches
 * (KV_ICACHE_INSNS FFMA of 16 bytes = 256 KiB; an H100 SM's L0 + L1 instruction caches hold
 * far less), run by a warp on each SM sub-partition, so the timed kernel fetches its own
 * instructions (and its parameters' constant lines, which share the L1.5 cache) from
 * DRAM, as under Nsight Compute's cache control (+0.05-0.1 us on 3-8 us kernels on an H100:
 * bench/results/2026-11-25-h100-ncu-fidelity-9/README.md). A
 * launch only reads the caches warm if something else left them so: a candidate's code
 * is cold in any program that runs other kernels between its calls. The FMAs run in four
 * independent chains (no folding: rn FMAs do not reassociate) and reach *sink only if
 * their sum equals key, which the caller makes impossible. */
#define KV_ICACHE_1 "fma.rn.f32 %0,%0,%4,%5;fma.rn.f32 %1,%1,%4,%5;" \
                    "fma.rn.f32 %2,%2,%4,%5;fma.rn.f32 %3,%3,%4,%5;"
#define KV_ICACHE_4 KV_ICACHE_1 KV_ICACHE_1 KV_ICACHE_1 KV_ICACHE_1
#define KV_ICACHE_16 KV_ICACHE_4 KV_ICACHE_4 KV_ICACHE_4 KV_ICACHE_4
#define KV_ICACHE_64 KV_ICACHE_16 KV_ICACHE_16 KV_ICACHE_16 KV_ICACHE_16
#define KV_ICACHE_256 KV_ICACHE_64 KV_ICACHE_64 KV_ICACHE_64 KV_ICACHE_64
#define KV_ICACHE_STMT asm volatile(KV_ICACHE_256 : "+f"(x0), "+f"(x1), "+f"(x2), "+f"(x3) \
                                    : "f"(a), "f"(b));
#define KV_ICACHE_STMT4 KV_ICACHE_STMT KV_ICACHE_STMT KV_ICACHE_STMT KV_ICACHE_STMT
#define KV_ICACHE_INSNS (4 * 256 * 16)   /* FFMAs: 4 per KV_ICACHE_1, 256 per statement */

extern "C" __global__ void __launch_bounds__(128) kevo_harness_icache(float *sink, float a,
                                                                       float b, float key)
{
    float x0 = (float)threadIdx.x, x1 = x0 + 1.0f, x2 = x0 + 2.0f, x3 = x0 + 3.0f;

    KV_ICACHE_STMT4 KV_ICACHE_STMT4 KV_ICACHE_STMT4 KV_ICACHE_STMT4
    if (x0 + x1 + x2 + x3 == key)
        *sink = x0;
}
#endif   /* KEVO_HARNESS_ON_HOST */

/* ==== verification: the device half of src/verify.c ====
 *
 *   kevo_harness_gen   fill (or, with `check`, check) a tensor exactly as
 *                      kevo_verify_generate does: element i is a pure function of
 *                      (stream key, i), so any grid gives the same tensor.
 *   kevo_harness_seal  XOR every element with its secret mask (an involution).
 *   kevo_harness_judge every check of one output in one pass; block b reduces a
 *                      contiguous chunk in a fixed tree order into parts[b], and the host
 *                      merges the parts in block order, so the result never depends on
 *                      scheduling (rel_l2 is the same bit for bit on the same data).
 *
 * Bit-identity with the host: every operation that rounds is written out one rounding at
 * a time (__dmul_rn, __dadd_rn: NVRTC would otherwise contract a*b+c into an FMA, which
 * the host, built with -std=c11, never does), and the dtype conversions are a port of
 * src/dtype_conv.c, not the cuda_fp16/cuda_fp8 intrinsics, so e5m2 overflow is +-Inf and
 * e4m3 saturates to +-448 exactly as on the host. The one allowed difference: log, cos and
 * sin in Box-Muller may differ from glibc's in the last bit of the double, before the
 * rounding to the dtype (normal inputs only).
 *
 * Dtype codes are enum kevo_dtype (src/task.h); init kinds enum kevo_init_kind.
 */

#define KV_F64 0
#define KV_F32 1
#define KV_F16 2
#define KV_BF16 3
#define KV_E4M3 4
#define KV_E5M2 5
#define KV_I64 6
#define KV_I32 7
#define KV_I16 8
#define KV_I8 9
#define KV_U8 10
#define KV_BOOL 11
#define KV_NORMAL 1
#define KV_UNIFORM 2
#define KV_GOLDEN 0x9E3779B97F4A7C15ull
#define KV_THREADS 256        /* the judge's block size: its tree is fixed */

__device__ __forceinline__ unsigned long long kv_mix64(unsigned long long x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

__device__ __forceinline__ unsigned long long kv_draw(unsigned long long key, unsigned long long i)
{
    return kv_mix64(key + (i + 1) * KV_GOLDEN);
}

__device__ __forceinline__ double kv_to01(unsigned long long u)
{
    return (double)(u >> 11) * 0x1.0p-53;
}

__device__ __forceinline__ int kv_size(int dt)
{
    return dt == KV_F64 || dt == KV_I64 ? 8 : dt == KV_F32 || dt == KV_I32 ? 4
         : dt == KV_F16 || dt == KV_BF16 || dt == KV_I16 ? 2 : 1;
}

__device__ __forceinline__ double kv_nan(void) { return __longlong_as_double(0x7FF8000000000000ll); }
__device__ __forceinline__ double kv_inf(void) { return __longlong_as_double(0x7FF0000000000000ll); }

/* double -> a narrow float format, round to nearest even (dtype_conv.c encode()). */
__device__ unsigned int kv_encode(double x, int ebits, int mbits, int bias, int has_inf)
{
    const unsigned int all1 = (1u << ebits) - 1, mmask = (1u << mbits) - 1;
    const unsigned int maxfin = has_inf ? (((all1 - 1) << mbits) | mmask)
                                        : ((all1 << mbits) | (mmask - 1));
    const unsigned int nanb = has_inf ? ((all1 << mbits) | (1u << (mbits - 1)))
                                      : ((all1 << mbits) | mmask);
    const unsigned int sign = signbit(x) ? 1u << (ebits + mbits) : 0u;
    const unsigned int infb = all1 << mbits;
    const double a = fabs(x);
    int e2 = 0;

    if (isnan(x))
        return sign | nanb;
    if (isinf(a))
        return sign | (has_inf ? infb : maxfin);
    if (a == 0.0)
        return sign;
    (void)frexp(a, &e2);
    int ex = e2 - 1;
    if (ex < 1 - bias)
        ex = 1 - bias;                          /* subnormal: the quantum stops shrinking */
    double m = rint(ldexp(a, mbits - ex));
    if (m >= ldexp(1.0, mbits + 1)) {           /* rounded up into the next binade */
        m = ldexp(1.0, mbits);
        ex++;
    }
    const unsigned int mi = (unsigned int)m;
    if (mi < (1u << mbits))
        return sign | mi;
    const long long field = (long long)ex + bias;
    if (field > (long long)all1 || (has_inf && field == (long long)all1))
        return sign | (has_inf ? infb : maxfin);
    unsigned int bits = ((unsigned int)field << mbits) | (mi - (1u << mbits));
    if (!has_inf && bits > maxfin)
        bits = maxfin;                          /* e4m3: would be the NaN pattern */
    return sign | bits;
}

/* A narrow float format -> double, exact (dtype_conv.c decode()). */
__device__ double kv_decode(unsigned int bits, int ebits, int mbits, int bias, int has_inf)
{
    const unsigned int mmask = (1u << mbits) - 1, all1 = (1u << ebits) - 1;
    const unsigned int field = (bits >> mbits) & all1, mant = bits & mmask;
    double v;

    if (field == all1 && has_inf)
        v = mant ? kv_nan() : kv_inf();
    else if (field == all1 && mant == mmask)
        v = kv_nan();
    else if (field == 0)
        v = ldexp((double)mant, 1 - bias - mbits);
    else
        v = ldexp((double)(mant | (1u << mbits)), (int)field - bias - mbits);
    return (bits >> (ebits + mbits)) & 1 ? -v : v;
}

/* Round to nearest (ties away) and clamp; NaN is 0 (dtype_conv.c round_clamp()). */
__device__ long long kv_round_clamp(double x, double lo, double hi)
{
    if (isnan(x))
        return 0;
    if (x <= lo)
        return (long long)lo;
    if (x >= hi)
        return x >= 9.2233720368547758e18 ? 0x7FFFFFFFFFFFFFFFll : (long long)hi;
    return llround(x);
}

__device__ long long kv_clamp(long long v, long long lo, long long hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The bits kevo_dt_store(dt, x) writes, zero-extended. */
__device__ unsigned long long kv_from_double(int dt, double x)
{
    switch (dt) {
    case KV_F64:  return (unsigned long long)__double_as_longlong(x);
    case KV_F32:  return __float_as_uint(__double2float_rn(x));
    case KV_F16:  return kv_encode(x, 5, 10, 15, 1);
    case KV_BF16: return kv_encode(x, 8, 7, 127, 1);
    case KV_E4M3: return kv_encode(x, 4, 3, 7, 0);
    case KV_E5M2: return kv_encode(x, 5, 2, 15, 1);
    case KV_I64:  return (unsigned long long)kv_round_clamp(x, -9.2233720368547758e18,
                                                            9.2233720368547758e18);
    case KV_I32:  return (unsigned int)(int)kv_round_clamp(x, -2147483648.0, 2147483647.0);
    case KV_I16:  return (unsigned short)(short)kv_round_clamp(x, -32768.0, 32767.0);
    case KV_I8:   return (unsigned char)(signed char)kv_round_clamp(x, -128.0, 127.0);
    case KV_U8:   return (unsigned char)kv_round_clamp(x, 0.0, 255.0);
    default:      return kv_round_clamp(x, -1.0, 1.0) != 0;
    }
}

/* The bits kevo_dt_store_int(dt, v) writes. */
__device__ unsigned long long kv_from_int(int dt, long long v)
{
    switch (dt) {
    case KV_I64:  return (unsigned long long)v;
    case KV_I32:  return (unsigned int)(int)kv_clamp(v, -2147483648ll, 2147483647ll);
    case KV_I16:  return (unsigned short)(short)kv_clamp(v, -32768, 32767);
    case KV_I8:   return (unsigned char)(signed char)kv_clamp(v, -128, 127);
    case KV_U8:   return (unsigned char)kv_clamp(v, 0, 255);
    case KV_BOOL: return v != 0;
    default:      return kv_from_double(dt, __ll2double_rn(v));
    }
}

__device__ __forceinline__ unsigned long long kv_get(int esz, const void *p, long long i)
{
    switch (esz) {
    case 8:  return ((const unsigned long long *)p)[i];
    case 4:  return ((const unsigned int *)p)[i];
    case 2:  return ((const unsigned short *)p)[i];
    default: return ((const unsigned char *)p)[i];
    }
}

__device__ __forceinline__ void kv_put(int esz, void *p, long long i, unsigned long long v)
{
    switch (esz) {
    case 8:  ((unsigned long long *)p)[i] = v; break;
    case 4:  ((unsigned int *)p)[i] = (unsigned int)v; break;
    case 2:  ((unsigned short *)p)[i] = (unsigned short)v; break;
    default: ((unsigned char *)p)[i] = (unsigned char)v; break;
    }
}

/* Element bits as a value: kevo_dt_load for floats, kevo_dt_load_int for integers. */
__device__ double kv_load(int dt, unsigned long long b)
{
    switch (dt) {
    case KV_F64:  return __longlong_as_double((long long)b);
    case KV_F32:  return (double)__uint_as_float((unsigned int)b);
    case KV_F16:  return kv_decode((unsigned int)b, 5, 10, 15, 1);
    case KV_BF16: return kv_decode((unsigned int)b, 8, 7, 127, 1);
    case KV_E4M3: return kv_decode((unsigned int)b, 4, 3, 7, 0);
    default:      return kv_decode((unsigned int)b, 5, 2, 15, 1);
    }
}

__device__ long long kv_load_int(int dt, unsigned long long b)
{
    switch (dt) {
    case KV_I64: return (long long)b;
    case KV_I32: return (int)(unsigned int)b;
    case KV_I16: return (short)(unsigned short)b;
    case KV_I8:  return (signed char)(unsigned char)b;
    default:     return (long long)(b & 0xFF);
    }
}

/*
 * Elements 2k and 2k+1 of a generated tensor (the host's pair granularity). Normal:
 * Box-Muller on one pair of uniforms, r cos and r sin; the rest element by element.
 */
__device__ void kv_gen_pair(int dt, int kind, double a, double b, long long lo, long long hi,
                            unsigned long long key, unsigned long long k,
                            unsigned long long *v0, unsigned long long *v1)
{
    if (kind == KV_NORMAL) {
        const double u1 = kv_to01(kv_draw(key, 2 * k));
        const double u2 = kv_to01(kv_draw(key, 2 * k + 1));
        const double r = __dsqrt_rn(__dmul_rn(-2.0, log(__dsub_rn(1.0, u1))));
        const double th = __dmul_rn(2.0 * 3.14159265358979323846, u2);
        double s, c;
        sincos(th, &s, &c);
        *v0 = kv_from_double(dt, __dadd_rn(a, __dmul_rn(b, __dmul_rn(r, c))));
        *v1 = kv_from_double(dt, __dadd_rn(a, __dmul_rn(b, __dmul_rn(r, s))));
    } else if (kind == KV_UNIFORM) {
        const double w = __dsub_rn(b, a);
        *v0 = kv_from_double(dt, __dadd_rn(a, __dmul_rn(w, kv_to01(kv_draw(key, 2 * k)))));
        *v1 = kv_from_double(dt, __dadd_rn(a, __dmul_rn(w, kv_to01(kv_draw(key, 2 * k + 1)))));
    } else {
        /* Lemire's multiply-shift: the high word of draw * range. */
        const unsigned long long range = (unsigned long long)hi - (unsigned long long)lo;
        *v0 = kv_from_int(dt, (long long)((unsigned long long)lo +
                                          __umul64hi(kv_draw(key, 2 * k), range)));
        *v1 = kv_from_int(dt, (long long)((unsigned long long)lo +
                                          __umul64hi(kv_draw(key, 2 * k + 1), range)));
    }
}

/* dst != 0: write n elements. Else compare check's elements with what would be written
 * and lower *first to the smallest differing index (the host sets it to ~0 first). */
extern "C" __global__ void kevo_harness_gen(void *dst, const void *check,
                                           unsigned long long *first, int dt, int kind,
                                           double a, double b, long long lo, long long hi,
                                           unsigned long long key, long long n)
{
    const int esz = kv_size(dt);
    const long long pairs = (n + 1) / 2;
    const long long step = (long long)gridDim.x * blockDim.x;

    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < pairs; k += step) {
        unsigned long long v0, v1;
        const long long i = 2 * k;
        kv_gen_pair(dt, kind, a, b, lo, hi, key, (unsigned long long)k, &v0, &v1);
        if (dst) {
            kv_put(esz, dst, i, v0);
            if (i + 1 < n)
                kv_put(esz, dst, i + 1, v1);
        } else if (kv_get(esz, check, i) != v0) {
            atomicMin(first, (unsigned long long)i);
        } else if (i + 1 < n && kv_get(esz, check, i + 1) != v1) {
            atomicMin(first, (unsigned long long)(i + 1));
        }
    }
}

/* The mask of element i (verify.c kevo_verify_seal_bits): key 0 is no mask. */
__device__ __forceinline__ unsigned long long kv_seal_bits(unsigned long long key,
                                                           unsigned long long i)
{
    return key ? kv_mix64(kv_draw(key, i) ^ kv_mix64(key ^ 0x5EA15EA15EA15EA1ull)) : 0ull;
}

extern "C" __global__ void kevo_harness_seal(void *buf, int esz, unsigned long long key,
                                            long long n)
{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        kv_put(esz, buf, i, kv_get(esz, buf, i) ^ kv_seal_bits(key, (unsigned long long)i));
}

/* One block's (or thread's) share of the judge. Only 8-byte members, in this order:
 * backend_cuda.c mirrors it as struct judge_part. */
struct kv_part {
    long long n_bad, first_bad, worst;
    double max_abs, max_rel, sum_d2, sum_w2;
    long long unw_a, unw_a_first, unw_b, unw_b_first, diff_first, a_varies;
    double ref_lo, ref_hi, ref_amax;
};

__device__ void kv_part_init(kv_part *p)
{
    p->n_bad = p->unw_a = p->unw_b = p->a_varies = 0;
    p->first_bad = p->worst = p->unw_a_first = p->unw_b_first = p->diff_first = -1;
    p->max_abs = p->max_rel = p->sum_d2 = p->sum_w2 = p->ref_amax = 0.0;
    p->ref_lo = kv_inf();
    p->ref_hi = -kv_inf();
}

__device__ __forceinline__ long long kv_first(long long x, long long y)
{
    return x < 0 ? y : y < 0 ? x : x < y ? x : y;
}

/* p += q. Order-free except the two sums; the worst element is the largest |error| with
 * the smallest index, which is what the host's serial scan finds. */
__device__ void kv_part_merge(kv_part *p, const kv_part *q)
{
    p->n_bad += q->n_bad;
    p->first_bad = kv_first(p->first_bad, q->first_bad);
    if (q->worst >= 0 && (p->worst < 0 || q->max_abs > p->max_abs ||
                          (q->max_abs == p->max_abs && q->worst < p->worst))) {
        p->max_abs = q->max_abs;
        p->worst = q->worst;
    }
    p->max_rel = q->max_rel > p->max_rel ? q->max_rel : p->max_rel;
    p->sum_d2 = __dadd_rn(p->sum_d2, q->sum_d2);
    p->sum_w2 = __dadd_rn(p->sum_w2, q->sum_w2);
    p->unw_a += q->unw_a;
    p->unw_a_first = kv_first(p->unw_a_first, q->unw_a_first);
    p->unw_b += q->unw_b;
    p->unw_b_first = kv_first(p->unw_b_first, q->unw_b_first);
    p->diff_first = kv_first(p->diff_first, q->diff_first);
    p->a_varies |= q->a_varies;
    p->ref_lo = q->ref_lo < p->ref_lo ? q->ref_lo : p->ref_lo;
    p->ref_hi = q->ref_hi > p->ref_hi ? q->ref_hi : p->ref_hi;
    p->ref_amax = q->ref_amax > p->ref_amax ? q->ref_amax : p->ref_amax;
}

/* A candidate for the worst element (verify.c cmp_float/cmp_int: strictly larger wins, so
 * within one thread's increasing indices the first of equals stays). */
__device__ __forceinline__ void kv_worst(kv_part *p, double d, long long i)
{
    if (d > p->max_abs || p->worst < 0) {
        p->max_abs = d;
        p->worst = i;
    }
}

/* One float pair (verify.c cmp_float_one and cmp_float). */
__device__ void kv_judge_float(kv_part *p, double o, double w, double rtol, double atol,
                               long long i)
{
    int bad;
    if (isnan(w)) {
        bad = !isnan(o);
    } else if (isinf(w)) {
        bad = o != w;
    } else if (!isfinite(o)) {
        bad = 1;
    } else {
        const double d = __dsub_rn(o, w);
        p->sum_d2 = __dadd_rn(p->sum_d2, __dmul_rn(d, d));
        p->sum_w2 = __dadd_rn(p->sum_w2, __dmul_rn(w, w));
        bad = !(fabs(d) <= __dadd_rn(atol, __dmul_rn(rtol, fabs(w))));
    }
    if (bad) {
        p->first_bad = p->first_bad < 0 ? i : p->first_bad;
        p->n_bad++;
    }
    if (isfinite(o) && isfinite(w)) {
        const double d = fabs(__dsub_rn(o, w));
        kv_worst(p, d, i);
        if (w != 0.0 && d / fabs(w) > p->max_rel)
            p->max_rel = d / fabs(w);
    }
}

/* One integer pair (verify.c cmp_int): exact, tolerances ignored. */
__device__ void kv_judge_int(kv_part *p, long long o, long long w, long long i)
{
    const double d = fabs(__dsub_rn((double)o, (double)w));
    kv_worst(p, d, i);
    if (o != w) {
        p->first_bad = p->first_bad < 0 ? i : p->first_bad;
        p->n_bad++;
        if (w != 0 && d / fabs((double)w) > p->max_rel)
            p->max_rel = d / fabs((double)w);
    }
}

/* The reference side of degenerate (verify.c kevo_verify_spread): finite values only. */
__device__ __forceinline__ void kv_spread(kv_part *p, double w)
{
    if (!isfinite(w))
        return;
    p->ref_lo = w < p->ref_lo ? w : p->ref_lo;
    p->ref_hi = w > p->ref_hi ? w : p->ref_hi;
    p->ref_amax = fabs(w) > p->ref_amax ? fabs(w) : p->ref_amax;
}

/* Block b judges elements [b * chunk, (b + 1) * chunk) into parts[b]. b may be 0 (no run
 * B); ref is sealed under key (0: in the clear). Launch with KV_THREADS threads. */
extern "C" __global__ void kevo_harness_judge(const void *a, const void *b, const void *ref,
                                             kv_part *parts, int dt, long long n,
                                             unsigned long long key, double rtol,
                                             double atol, unsigned long long pe_a,
                                             unsigned long long pe_b, long long chunk)
{
    __shared__ kv_part s[KV_THREADS];
    const int esz = kv_size(dt), is_float = dt <= KV_E5M2;
    const unsigned long long mask = esz == 8 ? ~0ull : (1ull << (8 * esz)) - 1;
    const long long lo = (long long)blockIdx.x * chunk;
    const long long hi = lo + chunk < n ? lo + chunk : n;
    const unsigned long long a0b = n > 0 ? kv_get(esz, a, 0) : 0;
    const double a0 = is_float ? kv_load(dt, a0b) : (double)kv_load_int(dt, a0b);
    kv_part p;

    kv_part_init(&p);
    for (long long i = lo + threadIdx.x; i < hi; i += KV_THREADS) {
        const unsigned long long ab = kv_get(esz, a, i);
        const unsigned long long rb =
            kv_get(esz, ref, i) ^ (kv_seal_bits(key, (unsigned long long)i) & mask);
        if (ab == pe_a && rb != pe_a) {
            p.unw_a_first = p.unw_a_first < 0 ? i : p.unw_a_first;
            p.unw_a++;
        }
        if (b) {
            const unsigned long long bb = kv_get(esz, b, i);
            if (bb == pe_b && rb != pe_b) {
                p.unw_b_first = p.unw_b_first < 0 ? i : p.unw_b_first;
                p.unw_b++;
            }
            if (bb != ab && p.diff_first < 0)
                p.diff_first = i;
        }
        double o, w;
        if (is_float) {
            o = kv_load(dt, ab);
            w = kv_load(dt, rb);
            kv_judge_float(&p, o, w, rtol, atol, i);
        } else {
            const long long oi = kv_load_int(dt, ab), wi = kv_load_int(dt, rb);
            kv_judge_int(&p, oi, wi, i);
            o = (double)oi;
            w = (double)wi;
        }
        p.a_varies |= !(o == a0);
        kv_spread(&p, w);
    }
    s[threadIdx.x] = p;
    __syncthreads();
    for (unsigned half = KV_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            kv_part_merge(&s[threadIdx.x], &s[threadIdx.x + half]);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        parts[blockIdx.x] = s[0];
}
