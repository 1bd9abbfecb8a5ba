#!/usr/bin/env python3
"""exemplars_json - the rows of bench/results/DATE-h100-exemplars.json (issue 15).

usage: exemplars_json.py --evals DIR --torch TORCH.json --out FILE [--date D]
       (DIR may also be the evals.tar.gz exemplars_h100.sh leaves)

DIR holds one `kevo eval --json --holdout TASK SEED [VARIANTS...]` document per task
(NAME.json); TORCH.json is bench/torch_baseline.py's baselines file from the same session.
For every visible workload of every candidate evaluated it writes a row
  {"task", "workload", "sizes", "candidate", "verdict", "holdout", "kevo_us", "torch_us",
   "baseline", "bound", "vs_torch"}
with `baseline` cuBLAS (a torch GEMM), SDPA (attention) or torch.compile (the rest; torch
eager where compile was not timed), `bound` memory or compute (the workload's bytes over
the calibrated bandwidth against its flops over the calibrated peak of its unit), and
vs_torch = torch_us / kevo_us (above 1: kevo's candidate is faster). It prints a table and
the geometric means the issue's targets are stated in.
"""
import argparse
import datetime
import json
import math
import os
import re
import sys
import tarfile
import tempfile

COMPUTE_BASELINE = {"matmul_bf16": "cuBLAS", "matmul_bf16_8192": "cuBLAS", "matmul_f32": "cuBLAS",
                    "causal_attention_bf16": "SDPA", "causal_attention_bf16_b8h16": "SDPA",
                    "conv2d_f32": "cuDNN"}
# tasks whose torch is a GEMM plus an epilogue: the faster of eager (cuBLAS, then GELU) and
# torch.compile (which may fuse it)
BEST_OF_TORCH = {"matmul_bias_gelu_bf16": "torch best (cuBLAS+GELU eager / compile)",
                 "swiglu_matmul_bf16": "torch best (2 cuBLAS+SwiGLU eager / compile)"}


def unit_of(task_path):
    with open(task_path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^\s*//\s+kevo\s+flops\s+.*\bon\s+(\w+)\s*$", line)
            if m:
                return m.group(1)
    return "fp32"


def bound(w, calib, unit):
    bw = calib.get("bandwidth", {}).get("best_bytes_per_s", 0)
    pk = calib.get("peaks", {}).get(unit, {}).get("used_flops_per_s", 0)
    if not bw or not pk:
        return "memory"
    return "compute" if w.get("flops", 0) / pk > w.get("bytes", 0) / bw else "memory"


def torch_time(entry, index, name):
    for w in entry.get("workloads", []):
        if w["index"] == index and not w.get("holdout"):
            if name in COMPUTE_BASELINE:
                return w.get("eager_s"), COMPUTE_BASELINE[name]
            if name in BEST_OF_TORCH:
                ts = [t for t in (w.get("eager_s"), w.get("compile_s")) if t]
                return (min(ts) if ts else None), BEST_OF_TORCH[name]
            if "compile_s" in w:
                return w["compile_s"], "torch.compile"
            return w.get("eager_s"), "torch eager"
    return None, None


def rows_of(doc, torch_doc):
    name = doc["task"]["name"]
    calib = doc.get("calibration", {})
    unit = unit_of(doc["task"]["path"])
    entry = torch_doc.get("tasks", {}).get(name, {})
    out = []
    for c in doc.get("candidates", []):
        hold = c.get("holdout", {}).get("verdict") if isinstance(c.get("holdout"), dict) else None
        for w in c.get("workloads", []):
            if w.get("holdout") or "time" not in w:
                continue
            ts, base = torch_time(entry, w["index"], name)
            kus = w["time"]["median_s"] * 1e6
            out.append({"task": name, "workload": w["index"], "sizes": w["sizes"],
                        "candidate": c["path"], "verdict": c["verdict"], "holdout": hold,
                        "kevo_us": round(kus, 3),
                        "torch_us": round(ts * 1e6, 3) if ts else None, "baseline": base,
                        "bound": bound(w, calib, unit),
                        "vs_torch": round(ts * 1e6 / kus, 4) if ts else None})
    return out


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--evals", required=True)
    ap.add_argument("--torch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    a = ap.parse_args()
    torch_doc = json.load(open(a.torch)) if os.path.exists(a.torch) else {}
    if a.evals.endswith(".tar.gz"):   # the archive exemplars_h100.sh leaves
        tmp = tempfile.mkdtemp(prefix="kevo-exemplars-")
        with tarfile.open(a.evals) as t:
            t.extractall(tmp, filter="data")
        a.evals = os.path.join(tmp, "evals")
    rows, device = [], None
    for f in sorted(os.listdir(a.evals)):
        if not f.endswith(".json"):
            continue
        try:
            doc = json.load(open(os.path.join(a.evals, f)))
        except (OSError, ValueError) as e:
            print(f"{f}: {e}", file=sys.stderr)
            continue
        device = device or doc.get("calibration", {}).get("device", {}).get("name")
        rows += rows_of(doc, torch_doc)
    res = {"device": device or torch_doc.get("device"), "date": a.date,
           "torch_version": torch_doc.get("torch_version"), "rows": rows}
    seeds = [r for r in rows if r["candidate"].startswith("examples/seeds/")]
    mem = [r["vs_torch"] for r in seeds if r["baseline"] == "torch.compile"]
    mem0 = [r["vs_torch"] for r in seeds if r["baseline"] == "torch.compile" and
            r["workload"] == 0]
    res["summary"] = {
        "memory_bound_geomean_vs_torch_compile": geomean(mem),
        "memory_bound_geomean_vs_torch_compile_primary_workloads": geomean(mem0),
        "gemm_bf16_vs_cublas": [r["vs_torch"] for r in seeds if r["task"] == "matmul_bf16"],
        "gemm_bf16_8192_vs_cublas": [r["vs_torch"] for r in seeds
                                     if r["task"] == "matmul_bf16_8192"],
        "gemm_bias_gelu_vs_torch": [r["vs_torch"] for r in seeds
                                    if r["task"] == "matmul_bias_gelu_bf16"],
        "attention_vs_sdpa": [r["vs_torch"] for r in seeds
                              if r["task"] == "causal_attention_bf16"],
        "conv2d_f32_vs_cudnn": [r["vs_torch"] for r in seeds if r["task"] == "conv2d_f32"],
        "attention_b8h16_vs_sdpa": [r["vs_torch"] for r in seeds
                                    if r["task"] == "causal_attention_bf16_b8h16"],
    }
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1)
    print(f"{'task':26} {'w':>1} {'candidate':44} {'verdict':9} {'hold':8} {'kevo_us':>10} "
          f"{'torch_us':>10} {'baseline':14} {'x':>6}")
    for r in rows:
        print(f"{r['task']:26} {r['workload']:>1} {r['candidate'][-44:]:44} {r['verdict']:9} "
              f"{str(r['holdout']):8} {r['kevo_us']:10.2f} "
              f"{(r['torch_us'] or 0):10.2f} {str(r['baseline']):14} {(r['vs_torch'] or 0):6.2f}")
    print(json.dumps(res["summary"]))


if __name__ == "__main__":
    main()
