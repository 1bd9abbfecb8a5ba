/*
 * worker - the evaluation process and its wire protocol. The controller never initialises
 * CUDA: it starts one worker per device (`kevo __worker --backend cpu|cuda --device N`) and
 * speaks to it over a pipe pair. Each message is a 4-byte big-endian length followed by
 * that many bytes of UTF-8 JSON (at most KEVO_WIRE_MAX bytes).
 *
 * Requests: {"id":N, "op":"ping"|"info"|"eval"|"calibrate"|"compile", ...op fields}
 *   eval: the fields of struct kevo_eval_req (eval.h)
 *   calibrate: {"force":0|1}
 *   compile: {"path":..., "text":..., "params":[...]} (compile only, resource report)
 * Replies: {"id":N, "status":"ok"|<status name>, "message":..., "result":{...}}
 *
 * A sticky device error: the worker sends its reply (verdict crash) and exits with
 * KEVO_WORKER_EXIT_DEVICE so the pool restarts it.
 */
#ifndef KEVO_WORKER_H
#define KEVO_WORKER_H

#include "kevo.h"
#include <jansson.h>

#define KEVO_WIRE_MAX (64u << 20)
#define KEVO_WORKER_EXIT_DEVICE 3

/* Blocking framed I/O on a file descriptor. EOF before a full message is KEVO_ERR_IO. */
KEVO_NODISCARD enum kevo_status kevo_wire_send(int fd, json_t *msg);
KEVO_NODISCARD enum kevo_status kevo_wire_recv(int fd, json_t **out);
/*
 * Receive with a deadline (absolute CLOCK_MONOTONIC seconds); KEVO_ERR_TIMEOUT when it
 * passes, KEVO_ERR_IO on EOF.
 */
KEVO_NODISCARD enum kevo_status kevo_wire_recv_until(int fd, double deadline, json_t **out);

/* Monotonic clock in seconds. */
double kevo_now(void);

#endif
