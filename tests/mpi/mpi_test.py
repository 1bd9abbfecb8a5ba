#!/usr/bin/env python3
"""mpi_test - `kevo run --mpi` under mpirun on one machine, CPU backend (tests/mpi/run.sh).

usage: tests/mpi/mpi_test.py KEVO

1. spread and same best: `mpirun -np 3 kevo run ... --mpi` evaluates on at least two ranks,
   every eval event and stored result names its rank and device, and it finds the same best
   as `kevo run` in one process with the same seed, budget and rng seed. How that is fair:
   the two runs cannot make the same proposals (three workers keep six candidates in
   flight, one keeps two, and results come back in the order they finish), so the task is
   made so that the search's randomness cannot change the answer. The seed's one param,
   SLEEP_US, sets the time; its six values are 1.4x or more apart, far beyond the timing
   noise, and the fastest, 20000, is the first value the sweep operator tries and a
   neighbour of the seed's value for the param operator, so a budget of 16 finds it in
   practice always (a run of 16 that never picks either operator, whose priors make them
   over half the picks, has a chance far below 1e-4). The other dimension, the C flags the
   flags operator toggles, does not change a sleep: candidates that differ only in flags
   tie, so the best is compared by SLEEP_US (and its time, within 20 %).
2. a worker rank killed: rank 2 gets SIGKILL right after its first result, while it
   evaluates its next candidate; the run must go on (mpirun --enable-recovery), report the
   rank lost with that evaluation sent elsewhere, and finish its budget with every
   candidate evaluated.
3. the controller killed: rank 0 gets SIGKILL mid-run; the other ranks see it gone and
   leave, and `kevo run --resume ID --mpi` finishes the run.
Exit status 0 when all pass; each failure is printed.
"""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
TASK = os.path.join(HERE, "sleep_task.c")
SEED = os.path.join(HERE, "sleep_seed.c")
SEED_MANY = os.path.join(HERE, "sleep_seed_many.c")
LIMIT_S = 240          # one kevo run (mpirun) at most
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def mpirun(n):
    cmd = ["mpirun", "--oversubscribe", "--enable-recovery", "-np", str(n),
           # shared memory without cross-memory attach, which containers may forbid
           "--mca", "btl_vader_single_copy_mechanism", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def run_events(cmd, on_event=None, env=None):
    """Run cmd; its stdout's JSON lines (kevo run --json) as events, on_event(e, proc) for
    each as it comes. Returns (exit status, events, stderr text)."""
    err = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    timer = threading.Timer(LIMIT_S, p.kill)
    timer.start()
    events = []
    for line in p.stdout:
        try:
            e = json.loads(line)
        except ValueError:
            continue           # mpirun's own lines
        if isinstance(e, dict):
            events.append(e)
            if on_event:
                on_event(e, p)
    rc = p.wait()
    timer.cancel()
    err.seek(0)
    return rc, events, err.read()


def kevo_run(kevo, archive, seed, budget, extra=()):
    return [kevo, "run", TASK, "--seed", seed, "--budget", str(budget), "--time-cap", "0.2",
            "--rng-seed", "7", "--backend", "cpu", "--archive", archive, "--json"] + list(extra)


def of_kind(events, kind):
    return [e for e in events if e.get("event") == kind]


def report(events):
    done = of_kind(events, "done")
    return done[-1]["report"] if done else {}


def show(kevo, archive, cand):
    out = subprocess.run([kevo, "show", str(cand), "--archive", archive, "--json"],
                         capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def stored_places(archive):
    """evaluated_by of every stored eval result of the archive."""
    db = sqlite3.connect(archive)
    try:
        rows = db.execute("SELECT result FROM evaluations").fetchall()
    finally:
        db.close()
    return [json.loads(r[0]).get("evaluated_by") for r in rows]


def pending(archive):
    db = sqlite3.connect(archive)
    try:
        return db.execute("SELECT count(*) FROM candidates WHERE state = 'pending'").fetchone()[0]
    finally:
        db.close()


def test_spread_and_same_best(kevo, tmp):
    one, many = os.path.join(tmp, "one.db"), os.path.join(tmp, "many.db")
    rc1, ev1, err1 = run_events(kevo_run(kevo, one, SEED, 16))
    rc3, ev3, err3 = run_events(mpirun(3) + kevo_run(kevo, many, SEED, 16, ["--mpi"]))
    if not check(rc1 == 0 and rc3 == 0, "spread: both runs exit 0 (1 process: %d, mpirun -np 3: "
                 "%d)" % (rc1, rc3)):
        print(err1[-2000:], err3[-3000:], sep="\n")
        return
    evals = of_kind(ev3, "eval")
    ranks = {e.get("rank") for e in evals}
    check(len(evals) == 16 and len(of_kind(ev1, "eval")) == 16, "spread: 16 evaluations each")
    check(len(ranks - {None}) >= 2, "spread: the evaluations ran on %d ranks (%s)"
          % (len(ranks - {None}), sorted(r for r in ranks if r is not None)))
    check(all(isinstance(e.get("device"), int) for e in evals), "spread: eval events name a device")
    places = [p for p in stored_places(many) if p]
    check(len(places) >= 16 and {p["rank"] for p in places} == ranks,
          "spread: the archive records each result's rank and device (evaluated_by)")
    b1, b3 = report(ev1).get("best", {}), report(ev3).get("best", {})
    p1 = show(kevo, one, b1.get("id")).get("params")
    p3 = show(kevo, many, b3.get("id")).get("params")
    check(p1 is not None and p1 == p3 == {"SLEEP_US": 20000},
          "spread: the same best, SLEEP_US 20000 (one process: %s, three ranks: %s)" % (p1, p3))
    s1, s3 = b1.get("score_s") or 0, b3.get("score_s") or 0
    check(s1 > 0 and s3 > 0 and max(s1, s3) / min(s1, s3) < 1.2,
          "spread: the best times agree within 20%% (%.2f ms, %.2f ms)" % (s1 * 1e3, s3 * 1e3))
    ranks_rep = report(ev3).get("ranks", [])
    check(len(ranks_rep) == 2 and all(r.get("state") in ("ready", "stopped") for r in ranks_rep),
          "spread: the report lists ranks 1 and 2, neither lost")


def test_worker_rank_killed(kevo, tmp):
    archive = os.path.join(tmp, "kill.db")
    state = {"pid": None, "killed": False}

    def on_event(e, p):
        if e.get("event") == "ranks":
            for r in e.get("ranks", []):
                if r.get("rank") == 2:
                    state["pid"] = r.get("pid")
        if e.get("event") == "eval" and e.get("rank") == 2 and not state["killed"] and state["pid"]:
            os.kill(state["pid"], signal.SIGKILL)   # it has its next candidate already
            state["killed"] = True

    env = dict(os.environ, KEVO_MPI_SILENCE_S="3")
    rc, ev, err = run_events(mpirun(3) + kevo_run(kevo, archive, SEED_MANY, 12, ["--mpi"]),
                             on_event, env)
    check(state["killed"], "kill: rank 2 (pid %s) was killed after its first result" % state["pid"])
    lost = of_kind(ev, "rank_lost")
    check(len(lost) == 1 and lost[0].get("rank") == 2, "kill: the run reports rank 2 lost")
    check(bool(lost) and lost[0].get("lost_calls", 0) >= 1,
          "kill: its evaluation in flight was sent elsewhere (%s)"
          % (lost[0].get("lost_calls") if lost else None))
    rep = report(ev)
    if not check(rep.get("reason") == "budget" and rep.get("evaluations") == 12,
                 "kill: the run finished its budget of 12 (%s after %s)"
                 % (rep.get("reason"), rep.get("evaluations"))):
        print(err[-3000:])
    check(pending(archive) == 0, "kill: no candidate is left pending")
    after = [e for e in of_kind(ev, "eval") if e.get("rank") == 2]
    check(len(after) == 1, "kill: nothing more came from rank 2")
    check(rc == 0, "kill: mpirun exits 0 (%d)" % rc)


def test_controller_killed(kevo, tmp):
    archive = os.path.join(tmp, "resume.db")
    state = {"pid": None, "n": 0, "run": None}

    def on_event(e, p):
        if e.get("event") == "ranks":
            state["pid"] = e.get("controller", {}).get("pid")
            state["run"] = e.get("run")
        if e.get("event") == "eval":
            state["n"] += 1
            if state["n"] == 2 and state["pid"]:
                os.kill(state["pid"], signal.SIGKILL)

    rc, ev, err = run_events(mpirun(3) + kevo_run(kevo, archive, SEED_MANY, 10, ["--mpi"]), on_event)
    check(state["n"] >= 2 and not of_kind(ev, "done"),
          "resume: the controller was killed mid-run and mpirun ended (%d)" % rc)
    rc, ev, err = run_events(mpirun(3) + [kevo, "run", "--resume", str(state["run"]), "--archive",
                                          archive, "--json", "--mpi"])
    rep = report(ev)
    if not check(rc == 0 and rep.get("evaluations") == 10,
                 "resume: --resume %s --mpi finished the budget of 10 (%s)"
                 % (state["run"], rep.get("evaluations"))):
        print(err[-3000:])
    check(pending(archive) == 0, "resume: no candidate is left pending")


def main():
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    kevo = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="kevo-mpi-") as tmp:
        os.environ["KEVO_CACHE_DIR"] = os.path.join(tmp, "cache")
        test_spread_and_same_best(kevo, tmp)
        test_worker_rank_killed(kevo, tmp)
        test_controller_killed(kevo, tmp)
    print("tests/mpi: %s" % ("%d failed" % len(failures) if failures else "all passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
