/*
 * mpi_io - kevo's side of an MPI job (docs/cluster.md): the public kevo_mpi_* of kevo.h
 * and, for the controller's run, the hub of relay.h over MPI. Built from mpi_io.c when
 * kevo is built with MPI (the Makefile finds mpicc), else from mpi_stub.c, whose
 * kevo_mpi_open says kevo was not built with MPI.
 *
 * The transport (mpi_io.c): one duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN;
 * messages are byte arrays tagged with their relay kind; sends are nonblocking and driven
 * by the receiving loop (MPI_Test), receives poll (MPI_Iprobe) with short naps, so no call
 * waits on one peer and a peer that dies or stalls is found by the relay's deadlines. MPI
 * is initialised for MPI_THREAD_SERIALIZED: one thread at a time uses it (the hub's thread,
 * or the caller's).
 */
#ifndef KEVO_MPI_IO_H
#define KEVO_MPI_IO_H

#include "kevo.h"
#include "ctl/relay.h"

/*
 * Rank 0: the hub of the other ranks, started at the first call with o (START names o's
 * backend and devices); borrowed, it lives until kevo_mpi_close. The ranks serve one run
 * per job: a second call is KEVO_ERR_INVALID. KEVO_ERR_UNSUPPORTED without MPI.
 */
KEVO_NODISCARD enum kevo_status kevo_mpi_hub(struct kevo_mpi *m,
                                             const struct kevo_relay_hub_opts *o,
                                             struct kevo_relay_hub **out, char **out_msg);

#endif
