#!/usr/bin/env bash
# A short CUDA search on the H100 (operators that need no LLM, the suite seed) whose new
# elites get their hardware counters (kevo run --profile-share, default 0.1): the events,
# which results carry a profile, what one costs, and the improve prompt built on the best;
# the archive comes back for `kevo report`.
export LD_LIBRARY_PATH=$PWD/build-gpu2/devlib:${LD_LIBRARY_PATH:-}
K=build-gpu2/kevo
export KEVO_ARCHIVE=$OUT/run.db KEVO_CACHE_DIR=/tmp/kevo-run-cache
$K run tasks/level1/softmax_rows.cu --seed examples/seeds/softmax_rows.cu --budget 24 --json > $OUT/events.jsonl 2> $OUT/run.err
echo "rc=$?"; tail -3 $OUT/run.err
python3 - $OUT/run.db $OUT/events.jsonl <<'PY' > $OUT/best.txt
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
best = {}
for line in open(sys.argv[2]):
    e = json.loads(line)
    if e.get("event") == "eval" and e.get("best"):
        best[e["id"]] = e["score_s"]
n = p = 0; cost = 0.0
for (cid, kind, r) in db.execute("SELECT cand_id, kind, result FROM evaluations ORDER BY id"):
    j = json.loads(r); n += 1
    pr = j.get("profile")
    if pr:
        p += 1; cost += pr.get("cost_s", 0)
    print("cand %-3d %-8s %s %s" % (cid, kind, "new best %.2f us" % (best[cid] * 1e6) if cid in best else "",
                                   ("profile: " + (pr.get("error") or pr.get("diagnosis"))) if pr else ""))
print("results", n, "with a profile", p, "profiling cost %.2f s" % cost)
print("last best", max(best) if best else None)
PY
cat $OUT/best.txt
b=$(tail -1 $OUT/best.txt | awk '{print $3}')
$K runs 1 | tail -12
[ -n "$b" ] && $K show $b | tail -14
