/*
 * worker - the evaluation process: kevo_worker_main (kevo.h) serves the requests of
 * core/wire.h on its protocol pipes, one at a time, with the backend of its device.
 * Only the CLI's `kevo __worker` enters it; the controller talks to it through
 * ctl/pool.h. docs/internals/worker.md.
 */
#ifndef KEVO_WORKER_H
#define KEVO_WORKER_H

#include "kevo.h"
#include "core/wire.h"

#endif
