#!/usr/bin/env python3
"""mpi_scaling - throughput and controller overhead of `kevo run --mpi` for 1..N ranks.

usage: bench/scripts/mpi_scaling.py KEVO [--ranks 1,2,...] [--per-slot N] [--backend cpu|cuda]
           [--task T --seed S] [--gpus LIST] [--local] [--rank0-no-device] [--out FILE]

For each rank count N it runs `mpirun -np N kevo run TASK --seed SEED --mpi --json` with a
budget of N x --per-slot evaluations (default 16: every worker evaluates about that many),
one worker per rank, and, with --local, the same search in one process with N local
workers (`--gpus 0,0,...`, no MPI) to tell MPI's share from the machine's. With
--rank0-no-device (CUDA) rank 0 sees no GPU (CUDA_VISIBLE_DEVICES empty): it only
controls, and N-1 other ranks evaluate, every request crossing MPI. The default task
is bench/tasks/cpu_sleep.c: about one second per evaluation, mostly asleep, so more workers
than cores still run side by side. $MPIRUN names the mpirun to use (default mpirun).

Figures per run, from the events (timed as they arrive) and the archive's results:
  evals/s   in the steady state: between the N-th and the (budget-N)-th result, when every
            worker has work (the first round waits for the seed's result, the last lacks
            new proposals: neither says anything about scaling)
  scaling   evals/s over N times the 1-rank run's evals/s
  overhead  the workers' idle share in that window: 1 - busy / (N x window), busy being
            the requests' wall times seen by the controller (request_s, each ending when
            its result arrived) cut to the window; what the controller (search, archive,
            dispatch, MPI relay) keeps them waiting
  relay_ms  per request: request_s minus the worker's own phases (compile, verify, time),
            mean over rank 0's own worker and over the other ranks': the pipe and the MPI
            hop's cost
  report    the run's own controller_overhead (whole run: start, seed, tail included)
"""
import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mpirun(n):
    cmd = [os.environ.get("MPIRUN", "mpirun"), "--oversubscribe", "--enable-recovery", "-np", str(n),
           "--mca", "btl_vader_single_copy_mechanism", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def run(cmd, env):
    """(events with their arrival time, exit status, stderr tail)."""
    err = tempfile.TemporaryFile(mode="w+")
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    evs = []
    for line in p.stdout:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            e["_t"] = time.monotonic() - t0
            evs.append(e)
    rc = p.wait()
    err.seek(0)
    return evs, rc, err.read()[-2000:]


def results(archive):
    """cand id -> its stored eval result (the last one of kind other than holdout)."""
    db = sqlite3.connect(archive)
    try:
        rows = db.execute("SELECT cand_id, kind, result FROM evaluations ORDER BY id").fetchall()
    finally:
        db.close()
    return {c: json.loads(r) for c, k, r in rows if k != "holdout"}


def figures(evs, res, n):
    evals = [e for e in evs if e.get("event") == "eval"]
    done = [e for e in evs if e.get("event") == "done"]
    rep = done[-1]["report"] if done else {}
    out = {"n": n, "evals": len(evals), "wall_s": rep.get("elapsed_s", 0),
           "report_overhead": rep.get("controller_overhead")}
    a, b = n, len(evals) - n   # the steady window: results a..b (1-based)
    if b - a < 2:
        return out
    ta, tb = evals[a - 1]["_t"], evals[b - 1]["_t"]
    window = tb - ta
    busy = 0.0   # each request's [end - request_s, end] cut to the window
    for e in evals:
        rq = res.get(e["id"], {}).get("request_s", 0)
        busy += max(0.0, min(e["_t"], tb) - max(e["_t"] - rq, ta))
    inside = [res.get(e["id"], {}).get("request_s", 0) for e in evals[a:b]]
    out["evals_per_s"] = (b - a) / window if window > 0 else 0
    out["overhead"] = 1 - busy / (n * window) if window > 0 else None
    out["eval_s"] = sum(inside) / len(inside) if inside else 0
    local, remote = [], []
    for r in res.values():
        ph = r.get("phases_s") or {}
        own = sum(v for v in ph.values() if isinstance(v, (int, float)))
        if "request_s" not in r or not own:
            continue
        by = (r.get("evaluated_by") or {}).get("rank", 0)
        (local if by == 0 else remote).append(r["request_s"] - own)
    out["relay_ms_local"] = 1e3 * sum(local) / len(local) if local else None
    out["relay_ms_remote"] = 1e3 * sum(remote) / len(remote) if remote else None
    ranks = {e.get("rank") for e in evals}
    out["ranks_used"] = len(ranks - {None})
    return out


def fmt(v, f):
    return "-" if v is None else f % v


def main():
    ap = argparse.ArgumentParser(description="kevo run --mpi scaling")
    ap.add_argument("kevo")
    ap.add_argument("--ranks", default="1,2,3,4,5,6,7,8")
    ap.add_argument("--per-slot", type=int, default=16)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--task", default=os.path.join(ROOT, "bench/tasks/cpu_sleep.c"))
    ap.add_argument("--seed", default=os.path.join(ROOT, "bench/tasks/cpu_sleep_seed.c"))
    ap.add_argument("--gpus", default=None, help="each rank's devices (default: one worker)")
    ap.add_argument("--local", action="store_true", help="also N local workers without MPI")
    ap.add_argument("--rank0-no-device", action="store_true",
                    help="rank 0 sees no GPU: a controller only (CUDA)")
    ap.add_argument("--extra", default="", help="more kevo run options")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    kevo = os.path.abspath(a.kevo)
    lines = []

    def say(s):
        print(s, flush=True)
        lines.append(s)

    say("# kevo run --mpi scaling, %s, %s, %d CPUs, backend %s" %
        (time.strftime("%Y-%m-%d %H:%M"), platform.node(), os.cpu_count(), a.backend))
    say("# task %s, seed %s, budget = N x %d, one worker per rank%s" %
        (os.path.relpath(a.task, ROOT), os.path.relpath(a.seed, ROOT), a.per_slot,
         " (--gpus %s each)" % a.gpus if a.gpus else ""))
    say("# %-10s %3s %5s %7s %8s %8s %8s %9s %10s %11s %8s" %
        ("mode", "N", "evals", "wall_s", "eval_s", "evals/s", "scaling", "overhead",
         "relay_ms0", "relay_msN", "report"))
    base = None
    with tempfile.TemporaryDirectory(prefix="kevo-scale-") as tmp:
        env = dict(os.environ, KEVO_CACHE_DIR=os.path.join(tmp, "cache"))
        for n in [int(x) for x in a.ranks.split(",")]:
            modes = [("mpi", n)] + ([("local", n)] if a.local else [])
            for mode, _ in modes:
                if mode == "mpi" and a.rank0_no_device and n < 2:
                    continue   # rank 0 alone would have no worker
                archive = os.path.join(tmp, "%s-%d.db" % (mode, n))
                cmd = [kevo, "run", a.task, "--seed", a.seed, "--budget", str(n * a.per_slot),
                       "--backend", a.backend, "--archive", archive, "--json", "--rng-seed", "3",
                       "--stagnation", "1000000"] + a.extra.split()
                if mode == "mpi" and a.rank0_no_device:   # MPMD: rank 0 without a GPU
                    tail = cmd + ["--mpi"] + (["--gpus", a.gpus] if a.gpus else [])
                    cmd = mpirun(1) + ["env", "CUDA_VISIBLE_DEVICES="] + tail + \
                        [":", "-np", str(n - 1)] + tail
                elif mode == "mpi":
                    cmd = mpirun(n) + cmd + ["--mpi"] + (["--gpus", a.gpus] if a.gpus else [])
                else:
                    cmd += ["--gpus", ",".join(["0"] * n)] if a.backend == "cpu" else \
                           ["--gpus", ",".join(str(i) for i in range(n))]
                evs, rc, err = run(cmd, env)
                if rc != 0:
                    say("# %s N=%d failed (%d): %s" % (mode, n, rc, err.replace("\n", " | ")))
                    continue
                start = [e for e in evs if e.get("event") == "start"]
                workers = start[0].get("workers", n) if start else n   # as the run counts them
                f = figures(evs, results(archive), workers)
                if base is None and workers == 1:
                    base = f.get("evals_per_s")
                scal = f.get("evals_per_s", 0) / (workers * base) if base else None
                label = "mpi-ctl0" if mode == "mpi" and a.rank0_no_device else mode
                say("  %-10s %3d %5d %7.1f %8.3f %8.3f %8s %9s %10s %11s %8s" %
                    (label, n, f["evals"], f["wall_s"], f.get("eval_s", 0),
                     f.get("evals_per_s", 0), fmt(scal, "%.3f"), fmt(f.get("overhead"), "%.4f"),
                     fmt(f.get("relay_ms_local"), "%.1f"), fmt(f.get("relay_ms_remote"), "%.1f"),
                     fmt(f.get("report_overhead"), "%.3f")))
    if a.out:
        with open(a.out, "a") as fh:
            fh.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
