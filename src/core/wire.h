/*
 * wire - the protocol between the controller and its workers, which both sides share.
 * The controller never initialises CUDA: it starts one worker per device
 * (`kevo __worker --backend cpu|cuda|none --device N`) and speaks to it over a pipe pair.
 * Each message is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON
 * (at most KEVO_WIRE_MAX bytes) that must be an object.
 *
 * Requests: {"id":N, "op":"ping"|"info"|"eval"|"calibrate"|"compile"|"check", ...op fields}
 *   eval: the fields of struct kevo_eval_req (worker/eval.h; docs/eval-json.md)
 *   calibrate: {"force":0|1}
 *   compile: {"path":..., "text":..., "params":[...]} (compile and load, resource report)
 *   check: {"path":..., "text":..., "cand_path"?, "cand_text"?, "arch":...} (compile only, no
 *          device: what `kevo check` asks; any backend, "none" too, answers it)
 * Replies: {"id":N, "status":"ok"|<status name>, "message":..., "result":{...}}
 *   An eval's result is decoded on the controller's side by core/result.h.
 *
 * A sticky device error: the worker sends its reply (verdict crash) and exits with
 * KEVO_WORKER_EXIT_DEVICE so the pool restarts it.
 */
#ifndef KEVO_WIRE_H
#define KEVO_WIRE_H

#include "kevo.h"
#include <jansson.h>

#define KEVO_WIRE_MAX (64u << 20)
#define KEVO_WORKER_EXIT_DEVICE 3

/* What a read produced besides its status, for readers that must tell the cases apart. */
struct kevo_wire_result {
    int eof;          /* 1: the peer closed the pipe before the first byte of a message */
    int in_sync;      /* 1: the stream is at a message boundary (safe to keep reading) */
    char why[200];    /* what was wrong with a message that did not parse */
};

/* Blocking framed I/O on a file descriptor. EOF before a full message is KEVO_ERR_IO. */
KEVO_NODISCARD enum kevo_status kevo_wire_send(int fd, json_t *msg);
KEVO_NODISCARD enum kevo_status kevo_wire_recv(int fd, json_t **out);
/*
 * Receive with a deadline (absolute kevo_now() seconds); KEVO_ERR_TIMEOUT when it
 * passes, KEVO_ERR_IO on EOF.
 */
KEVO_NODISCARD enum kevo_status kevo_wire_recv_until(int fd, double deadline, json_t **out);
/* The same with the details (*wr); deadline NULL: none. A message that is not a JSON
 * object is KEVO_ERR_PARSE with wr->why, wr->in_sync telling whether reading may go on. */
KEVO_NODISCARD enum kevo_status kevo_wire_read(int fd, const double *deadline, json_t **out,
                                               struct kevo_wire_result *wr);

#endif
