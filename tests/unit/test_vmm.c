/*
 * test_vmm - worker/vmm.c against a fake CUDA driver table (no GPU needed): blocks are
 * reserved with gaps and mapped so the data ends where the mapping ends, kept and reused,
 * and a driver call failing part way (fault injection on each call) leaks no memory,
 * mapping or address: not in an allocation, not in a release.
 */
#include "testutil.h"
#include "worker/vmm.h"

#include <string.h>

/* ---- the fake driver: handles are numbers, mappings a small table ---- */

#define MAXMAP 16
static struct {
    CUdeviceptr va[MAXMAP];
    size_t size[MAXMAP];
    CUmemGenericAllocationHandle h[MAXMAP];
    int n;
    unsigned long long next_h, next_va;
    int live_handles;
    int fail_create, fail_map, fail_access, fail_unmap;   /* n: the n-th call fails (1-based) */
    int calls_create, calls_map, calls_access, calls_unmap;
} F;

static int hit(int *calls, int fail) { return ++*calls == fail; }

static CUresult CUDAAPI f_attr(int *v, CUdevice_attribute a, CUdevice dev)
{
    (void)a;
    (void)dev;
    *v = 1;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI f_gran(size_t *g, const CUmemAllocationProp *p,
                               CUmemAllocationGranularity_flags o)
{
    (void)p;
    (void)o;
    *g = 2u << 20;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI f_reserve(CUdeviceptr *va, size_t size, size_t align, CUdeviceptr addr,
                                  unsigned long long flags)
{
    (void)align;
    (void)addr;
    (void)flags;
    *va = (CUdeviceptr)F.next_va;
    F.next_va += size + (1ull << 30);
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI f_free(CUdeviceptr va, size_t size)
{
    (void)va;
    (void)size;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI f_create(CUmemGenericAllocationHandle *h, size_t size,
                                 const CUmemAllocationProp *p, unsigned long long flags)
{
    (void)size;
    (void)p;
    (void)flags;
    if (hit(&F.calls_create, F.fail_create))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *h = ++F.next_h;
    F.live_handles++;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI f_release(CUmemGenericAllocationHandle h)
{
    (void)h;
    F.live_handles--;
    return CUDA_SUCCESS;
}

static int find_map(CUdeviceptr va)
{
    for (int i = 0; i < F.n; i++)
        if (F.va[i] == va)
            return i;
    return -1;
}

static CUresult CUDAAPI f_map(CUdeviceptr va, size_t size, size_t off,
                              CUmemGenericAllocationHandle h, unsigned long long flags)
{
    (void)off;
    (void)flags;
    if (hit(&F.calls_map, F.fail_map) || find_map(va) >= 0 || F.n == MAXMAP)
        return CUDA_ERROR_INVALID_VALUE;
    F.va[F.n] = va;
    F.size[F.n] = size;
    F.h[F.n++] = h;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI f_unmap(CUdeviceptr va, size_t size)
{
    (void)size;
    int i = find_map(va);
    if (hit(&F.calls_unmap, F.fail_unmap) || i < 0)
        return CUDA_ERROR_INVALID_VALUE;
    F.va[i] = F.va[--F.n];
    F.size[i] = F.size[F.n];
    F.h[i] = F.h[F.n];
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI f_access(CUdeviceptr va, size_t size, const CUmemAccessDesc *a,
                                 size_t n)
{
    (void)va;
    (void)size;
    (void)a;
    (void)n;
    return hit(&F.calls_access, F.fail_access) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult CUDAAPI f_errname(CUresult r, const char **s)
{
    *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_INVALID_VALUE";
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI f_errstr(CUresult r, const char **s)
{
    (void)r;
    *s = "fake";
    return CUDA_SUCCESS;
}

static struct kevo_cudrv D;

static int setup(void **state)
{
    (void)state;
    memset(&F, 0, sizeof F);
    F.next_va = 1ull << 40;
    memset(&D, 0, sizeof D);
    D.cuDeviceGetAttribute = f_attr;
    D.cuMemGetAllocationGranularity = f_gran;
    D.cuMemAddressReserve = f_reserve;
    D.cuMemAddressFree = f_free;
    D.cuMemCreate = f_create;
    D.cuMemRelease = f_release;
    D.cuMemMap = f_map;
    D.cuMemUnmap = f_unmap;
    D.cuMemSetAccess = f_access;
    D.cuGetErrorName = f_errname;
    D.cuGetErrorString = f_errstr;
    return 0;
}

/* The handle mapped at the block's data (the mapping that holds addr). */
static CUmemGenericAllocationHandle mapped_at(CUdeviceptr addr)
{
    for (int i = 0; i < F.n; i++)
        if (addr >= F.va[i] && addr < F.va[i] + F.size[i])
            return F.h[i];
    return 0;
}

static void test_alloc_maps_between_gaps(void **state)
{
    (void)state;
    struct kevo_vmm *v = NULL;
    CUdeviceptr a = 0, b = 0;

    assert_int_equal(kevo_vmm_open(&D, 0, &v, NULL), KEVO_OK);
    assert_int_equal(kevo_vmm_alloc(v, 1000, &a, NULL), KEVO_OK);
    assert_int_equal(kevo_vmm_alloc(v, 3u << 20, &b, NULL), KEVO_OK);
    assert_int_equal(F.n, 2);
    assert_true(mapped_at(a) != 0);
    assert_true(mapped_at(a + 1023) != 0);  /* 1000 bytes round to 1024, which end where */
    assert_int_equal(mapped_at(a + 1024), 0);  /* the mapping ends */
    assert_int_equal(kevo_vmm_free(v, a), 1);
    assert_int_equal(kevo_vmm_free(v, a), 0);   /* not live any more */
    kevo_vmm_close(v, 0);
    assert_int_equal(F.n, 0);
    assert_int_equal(F.live_handles, 0);
}

static void test_kept_blocks_are_reused(void **state)
{
    (void)state;
    struct kevo_vmm *v = NULL;
    CUdeviceptr a = 0, b = 0;

    assert_int_equal(kevo_vmm_open(&D, 0, &v, NULL), KEVO_OK);
    assert_int_equal(kevo_vmm_alloc(v, 3u << 20, &a, NULL), KEVO_OK);
    CUmemGenericAllocationHandle h = mapped_at(a);
    assert_int_equal(kevo_vmm_free(v, a), 1);
    assert_int_equal(F.n, 1);                   /* kept mapped for the next request */
    assert_int_equal(kevo_vmm_alloc(v, 4u << 20, &b, NULL), KEVO_OK);   /* same 4 MiB map */
    assert_int_equal(mapped_at(b), h);
    assert_int_equal(F.calls_create, 1);
    assert_int_equal(b + (4u << 20), a + (3u << 20));   /* both end where the mapping ends */
    kevo_vmm_close(v, 0);
    assert_int_equal(F.live_handles, 0);
}

/* Each driver call of an allocation failing in turn: an error naming the call, and
 * nothing left behind. */
static void test_alloc_failures_leak_nothing(void **state)
{
    (void)state;
    static const char *const call[] = {"cuMemCreate", "cuMemMap", "cuMemSetAccess"};
    for (int which = 0; which < 3; which++) {
        struct kevo_vmm *v = NULL;
        struct kevo_buf err;
        CUdeviceptr a = 1;

        setup(NULL);
        kevo_buf_init(&err, 1024);
        assert_int_equal(kevo_vmm_open(&D, 0, &v, NULL), KEVO_OK);
        if (which == 0)
            F.fail_create = 1;
        else if (which == 1)
            F.fail_map = 1;
        else
            F.fail_access = 1;
        assert_int_not_equal(kevo_vmm_alloc(v, 256, &a, &err), KEVO_OK);
        assert_int_equal(a, 0);
        assert_non_null(strstr(kevo_buf_str(&err), call[which]));
        assert_int_equal(F.n, 0);
        assert_int_equal(F.live_handles, 0);
        kevo_vmm_close(v, 0);
        kevo_buf_free(&err);
    }
}

/* Memory kept for reuse is what is missing: it is given back and the allocation retried. */
static void test_alloc_drops_kept_blocks_when_short(void **state)
{
    (void)state;
    struct kevo_vmm *v = NULL;
    struct kevo_buf err;
    CUdeviceptr a = 0, b = 0;

    kevo_buf_init(&err, 1024);
    assert_int_equal(kevo_vmm_open(&D, 0, &v, NULL), KEVO_OK);
    assert_int_equal(kevo_vmm_alloc(v, 256, &a, NULL), KEVO_OK);
    assert_int_equal(kevo_vmm_free(v, a), 1);
    F.fail_create = F.calls_create + 1;         /* the next create fails, the retry not */
    assert_int_equal(kevo_vmm_alloc(v, 8u << 20, &b, &err), KEVO_OK);
    assert_int_equal(kevo_buf_str(&err)[0], '\0');   /* the first failure is not reported */
    assert_int_equal(F.n, 1);
    assert_int_equal(F.live_handles, 1);
    kevo_vmm_close(v, 0);
    assert_int_equal(F.live_handles, 0);
    kevo_buf_free(&err);
}

/* A release whose unmapping fails still gives back the memory (it used to stop at the
 * first failed step and leak the handle). */
static void test_release_tries_every_step(void **state)
{
    (void)state;
    struct kevo_vmm *v = NULL;
    CUdeviceptr a = 0, b = 0;

    assert_int_equal(kevo_vmm_open(&D, 0, &v, NULL), KEVO_OK);
    assert_int_equal(kevo_vmm_alloc(v, 256, &a, NULL), KEVO_OK);
    assert_int_equal(kevo_vmm_alloc(v, 256, &b, NULL), KEVO_OK);
    F.fail_unmap = F.calls_unmap + 1;           /* the first block's unmapping fails */
    kevo_vmm_close(v, 0);
    assert_int_equal(F.live_handles, 0);
    assert_int_equal(F.n, 1);                   /* only the mapping that refused remains */
    kevo_vmm_close(NULL, 0);                    /* a no-op */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_alloc_maps_between_gaps, setup),
        cmocka_unit_test_setup(test_kept_blocks_are_reused, setup),
        cmocka_unit_test_setup(test_alloc_failures_leak_nothing, setup),
        cmocka_unit_test_setup(test_alloc_drops_kept_blocks_when_short, setup),
        cmocka_unit_test_setup(test_release_tries_every_step, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
