/*
 * mpi_stub - kevo_mpi_* (kevo.h, mpi_io.h) in a kevo built without MPI: opening says so,
 * and nothing else can be reached without an open handle. The Makefile builds this file
 * instead of mpi_io.c when it finds no mpicc.
 */
#include "ctl/mpi_io.h"

#include "base/mem.h"

enum kevo_status kevo_mpi_open(struct kevo_mpi **out, char **out_msg)
{
    *out = NULL;
    *out_msg = kevo_strdup("this kevo was not built with MPI: install Open MPI (apt-get install "
                           "libopenmpi-dev openmpi-bin) and rebuild (docs/cluster.md)");
    return KEVO_ERR_UNSUPPORTED;
}

const char *kevo_mpi_library(void)
{
    return NULL;
}

int kevo_mpi_rank(const struct kevo_mpi *m)
{
    (void)m;
    return 0;
}

int kevo_mpi_size(const struct kevo_mpi *m)
{
    (void)m;
    return 1;
}

enum kevo_status kevo_mpi_serve(struct kevo_mpi *m, char **out_msg)
{
    (void)m;
    *out_msg = kevo_strdup("this kevo was not built with MPI");
    return KEVO_ERR_UNSUPPORTED;
}

void kevo_mpi_close(struct kevo_mpi *m)
{
    (void)m;
}

enum kevo_status kevo_mpi_hub(struct kevo_mpi *m, const struct kevo_relay_hub_opts *o,
                              struct kevo_relay_hub **out, char **out_msg)
{
    (void)m;
    (void)o;
    *out = NULL;
    *out_msg = kevo_strdup("this kevo was not built with MPI");
    return KEVO_ERR_UNSUPPORTED;
}
