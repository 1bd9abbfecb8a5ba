/*
 * vmm - guarded device memory for the CUDA backend (see vmm.h): reserve, create, map, set
 * access, per block, with unmapped gaps around each; freed blocks kept for reuse.
 */
#include "worker/vmm.h"
#include "base/log.h"
#include "base/mem.h"

#include <string.h>

#define VMM_GAP_MIN ((uint64_t)1 << 31)    /* below this the gap is not worth having */

struct vblk {
    CUdeviceptr va;            /* the reservation: gap | mapping | gap */
    uint64_t gap;
    size_t map;                /* mapped bytes (a multiple of the granularity) */
    CUmemGenericAllocationHandle h;
    CUdeviceptr user;          /* the address handed out (0 while kept for reuse) */
};

struct kevo_vmm {
    const struct kevo_cudrv *d;
    CUdevice dev;
    size_t gran;
    uint64_t gap;
    struct vblk *b;            /* live and kept blocks */
    int n, cap, kept;
    size_t kept_bytes;
};

static CUmemAllocationProp vmm_prop(CUdevice dev)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = (int)dev;
    return p;
}

enum kevo_status kevo_vmm_open(const struct kevo_cudrv *d, CUdevice dev, struct kevo_vmm **out,
                               struct kevo_buf *err)
{
    CUmemAllocationProp p = vmm_prop(dev);
    size_t gran = 0;
    int supported = 0;
    enum kevo_status st;

    *out = NULL;
    st = KEVO_CU(d, err, d->cuDeviceGetAttribute(
                             &supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
    if (!st && !supported) {
        kevo_buf_say(err, "cuda: the device has no virtual memory management (guarded memory)");
        return KEVO_ERR_CUDA;
    }
    if (!st)
        st = KEVO_CU(d, err, d->cuMemGetAllocationGranularity(&gran, &p,
                                                              CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (st)
        return st;
    struct kevo_vmm *v = kevo_calloc(1, sizeof *v);
    if (!v)
        return KEVO_ERR_NOMEM;
    v->d = d;
    v->dev = dev;
    v->gran = gran ? gran : (size_t)2 << 20;
    v->gap = KEVO_VMM_GAP;
    *out = v;
    return KEVO_OK;
}

/* Unmap and give back block i's memory and addresses (the context is alive). */
static void blk_release(struct kevo_vmm *v, struct vblk *b)
{
    const struct kevo_cudrv *d = v->d;
    /* each step tried whatever the one before said: a block whose unmapping fails still
     * has memory and addresses to give back */
    int bad = d->cuMemUnmap(b->va + b->gap, b->map) != CUDA_SUCCESS;
    bad |= (d->cuMemRelease(b->h) != CUDA_SUCCESS) << 1;
    bad |= (d->cuMemAddressFree(b->va, b->map + 2 * b->gap) != CUDA_SUCCESS) << 2;
    if (bad)
        KEVO_DEBUG("vmm: releasing a %zu-byte block: steps failed (mask %d: 1 unmap, 2 release, "
                   "4 address free)", b->map, bad);
}

static void blk_remove(struct kevo_vmm *v, int i)
{
    memmove(v->b + i, v->b + i + 1, sizeof *v->b * (size_t)(v->n - i - 1));
    v->n--;
}

/* Release every kept block (memory is short, or the backend closes). */
static void drop_kept(struct kevo_vmm *v)
{
    for (int i = v->n - 1; i >= 0; i--) {
        if (!v->b[i].user) {
            blk_release(v, &v->b[i]);
            blk_remove(v, i);
        }
    }
    v->kept = 0;
    v->kept_bytes = 0;
}

void kevo_vmm_close(struct kevo_vmm *v, int lost)
{
    if (!v)
        return;
    for (int i = 0; i < v->n && !lost; i++)
        blk_release(v, &v->b[i]);
    kevo_free(v->b);
    kevo_free(v);
}

/* Reserve gap | map | gap, halving the gap while the address space refuses it. */
static enum kevo_status reserve(struct kevo_vmm *v, size_t map, CUdeviceptr *va,
                                struct kevo_buf *err)
{
    for (;;) {
        CUresult r = v->d->cuMemAddressReserve(va, map + 2 * v->gap, v->gran, 0, 0);
        if (r == CUDA_SUCCESS)
            return KEVO_OK;
        if (v->gap / 2 < VMM_GAP_MIN)
            return KEVO_CU(v->d, err, r);
        v->gap /= 2;
        KEVO_WARN("cuda: guarded memory: the address space is short; gaps shrink to %llu MiB",
                  (unsigned long long)(v->gap >> 20));
    }
}

/* Map handle h over block b's mapping and make it read-write for the device. */
static enum kevo_status blk_map(struct kevo_vmm *v, struct vblk *b,
                                CUmemGenericAllocationHandle h, struct kevo_buf *err)
{
    const struct kevo_cudrv *d = v->d;
    CUmemAccessDesc a;
    enum kevo_status st = KEVO_CU(d, err, d->cuMemMap(b->va + b->gap, b->map, 0, h, 0));

    memset(&a, 0, sizeof a);
    a.location = vmm_prop(v->dev).location;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (!st) {
        st = KEVO_CU(d, err, d->cuMemSetAccess(b->va + b->gap, b->map, &a, 1));
        if (st)
            (void)d->cuMemUnmap(b->va + b->gap, b->map);
    }
    return st;
}

/* A fresh block of `map` bytes: reserve, create, map, make read-write for the device. */
static enum kevo_status blk_new(struct kevo_vmm *v, size_t map, struct vblk *b,
                                struct kevo_buf *err)
{
    const struct kevo_cudrv *d = v->d;
    CUmemAllocationProp p = vmm_prop(v->dev);
    enum kevo_status st;

    memset(b, 0, sizeof *b);
    st = reserve(v, map, &b->va, err);
    if (st)
        return st;
    b->gap = v->gap;
    b->map = map;
    st = KEVO_CU(d, err, d->cuMemCreate(&b->h, map, &p, 0));
    if (st) {
        (void)d->cuMemAddressFree(b->va, map + 2 * b->gap);
        return st;
    }
    st = blk_map(v, b, b->h, err);
    if (st) {
        (void)d->cuMemRelease(b->h);
        (void)d->cuMemAddressFree(b->va, map + 2 * b->gap);
    }
    return st;
}

enum kevo_status kevo_vmm_alloc(struct kevo_vmm *v, size_t bytes, CUdeviceptr *out,
                                struct kevo_buf *err)
{
    size_t need = bytes ? (bytes + 255) / 256 * 256 : 256;
    size_t map = (need + v->gran - 1) / v->gran * v->gran;
    struct vblk nb;
    enum kevo_status st;

    *out = 0;
    if (need < bytes || map < need)
        return KEVO_ERR_TOOBIG;
    for (int i = 0; i < v->n; i++) {   // a kept block of the same mapped size
        if (!v->b[i].user && v->b[i].map == map) {
            v->b[i].user = v->b[i].va + v->b[i].gap + map - need;
            v->kept--;
            v->kept_bytes -= map;
            *out = v->b[i].user;
            return KEVO_OK;
        }
    }
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 64;
        struct vblk *nbv = kevo_reallocarray(v->b, (size_t)cap, sizeof *nbv);
        if (!nbv)
            return KEVO_ERR_NOMEM;
        v->b = nbv;
        v->cap = cap;
    }
    st = blk_new(v, map, &nb, err);
    if (st && v->kept) {   // memory held for reuse may be what is missing
        kevo_buf_reset(err);
        drop_kept(v);
        st = blk_new(v, map, &nb, err);
    }
    if (st)
        return st;
    nb.user = nb.va + nb.gap + map - need;
    v->b[v->n++] = nb;
    *out = nb.user;
    return KEVO_OK;
}

int kevo_vmm_free(struct kevo_vmm *v, CUdeviceptr addr)
{
    for (int i = 0; v && addr && i < v->n; i++) {
        if (v->b[i].user != addr)
            continue;
        if (v->kept < KEVO_VMM_KEEP && v->b[i].map <= KEVO_VMM_KEEP_BYTES - v->kept_bytes) {
            v->b[i].user = 0;
            v->kept++;
            v->kept_bytes += v->b[i].map;
        } else {
            blk_release(v, &v->b[i]);
            blk_remove(v, i);
        }
        return 1;
    }
    return 0;
}

size_t kevo_vmm_granule(const struct kevo_vmm *v) { return v ? v->gran : 0; }

uint64_t kevo_vmm_gap(const struct kevo_vmm *v) { return v ? v->gap : 0; }
