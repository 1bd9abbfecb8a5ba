#!/usr/bin/env bash
# llm-scripted-gpu.sh KEVO OUTDIR - the LLM operators on a CUDA task on a GPU, end to end,
# with a scripted model (tools/scripted_llm.py answering from examples/scripted-llm/): the
# generated kernel does not compile, the fix repairs it, improve brings a float4 version;
# the run, its replay, and one prompt of each operator as the model saw it. Raw output
# under OUTDIR.
set -uo pipefail
kevo=${1:-build/kevo}
out=${2:-/tmp/kevo-llm-scripted}
port=${PORT:-18931}
mkdir -p "$out"
export KEVO_ARCHIVE="$out/archive.db"
rm -f "$KEVO_ARCHIVE"* "$out/requests.jsonl"
python3 tools/scripted_llm.py examples/scripted-llm "$port" "$out/requests.jsonl" &
srv=$!
sleep 1
hdr() { echo "# $1"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"; echo "# date: $(date -u +%FT%TZ)"; echo "# command: $2"; }
c="$kevo run tasks/level1/softmax_rows.cu --model openai:scripted@http://127.0.0.1:$port/v1 --llm-concurrency 2 --budget ${BUDGET:-24}"
{ hdr "kevo run with the LLM operators (scripted model)" "$c"; $c; echo "rc=$?"; } > "$out/run.txt" 2>&1
kill $srv
tail -8 "$out/run.txt"
c="$kevo run --replay 1"
{ hdr "kevo run --replay of the run above (the model's server is gone)" "$c"; $c; echo "rc=$?"; } > "$out/replay.txt" 2>&1
tail -4 "$out/replay.txt"
$kevo runs 1 > "$out/runs1.txt" 2>&1
python3 - "$KEVO_ARCHIVE" "$out" <<'PY'
import sqlite3, sys
db, out = sys.argv[1], sys.argv[2]
c = sqlite3.connect(db)
rows = c.execute("SELECT op, status, count(*), sum(tokens_in), sum(tokens_out) FROM llm_calls"
                 " WHERE run_id = 1 GROUP BY op, status ORDER BY op").fetchall()
with open(f"{out}/llm_calls.txt", "w") as f:
    f.write("op status calls tokens_in tokens_out (run 1)\n")
    for r in rows:
        f.write(" ".join(str(x) for x in r) + "\n")
print(open(f"{out}/llm_calls.txt").read())
for op in ("llm_generate", "llm_fix", "llm_improve", "llm_plan"):
    r = c.execute("SELECT prompt FROM llm_calls WHERE run_id = 1 AND op = ? ORDER BY id LIMIT 1",
                  (op,)).fetchone()
    if r:
        open(f"{out}/prompt_{op}.txt", "w").write(r[0])
PY
