#!/usr/bin/env python3
"""torch_baseline - PyTorch baselines for kevo's task suite, and a check of every reference.

Optional: kevo itself never needs Python. On a machine with a GPU and PyTorch:

    python3 bench/torch_baseline.py --kevo build/kevo --out baselines.json tasks/

For every task file (a directory is walked) it
  1. asks kevo for the inputs and the reference's outputs of every workload, holdouts
     included (`kevo eval TASK --dump DIR --no-timing --holdout`: kevo's own generator and
     kevo's own run of the reference),
  2. runs the task's `torch` block on those inputs and compares with the reference's outputs
     under the task's tolerance (elementwise |ref - torch| <= atol + rtol*|torch| and relative
     L2 <= rtol), with TF32 and reduced-precision fp16/bf16 reductions off; when the block in
     the inputs' own dtypes disagrees, it is also run with float inputs upcast to float64 and
     the reference passes if it matches that (the exact function),
  3. times PyTorch eager and torch.compile on the visible workloads: an L2 flush (a 2x-L2
     buffer written) before each sample, CUDA events, the median of the samples,
and writes a baselines file for `kevo bench --baselines FILE` (format in docs/bench.md).

The `torch` lines of a task form one Python block; the last line is the expression giving
the outputs (a tuple in declaration order when there are several). Names bound: each input
(a CUDA tensor of its dtype and shape), each scalar (a Python number), each size (an int),
and torch, F (torch.nn.functional), math.
"""
import argparse
import ast
import datetime
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

DTYPES = {
    "f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
    "fp8e4m3": torch.float8_e4m3fn, "fp8e5m2": torch.float8_e5m2, "i64": torch.int64,
    "i32": torch.int32, "i16": torch.int16, "i8": torch.int8, "u8": torch.uint8,
    "bool": torch.bool,
}
DEFAULT_TOL = {  # docs/task-format.md "Tolerances"
    "f64": (1e-7, 1e-9), "f32": (1e-4, 1e-5), "f16": (1e-2, 1e-3), "bf16": (2e-2, 1e-2),
    "fp8e4m3": (1.25e-1, 1e-1), "fp8e5m2": (1.25e-1, 1e-1),
}
DIRECTIVE = re.compile(r"^\s*//\s+kevo(?:\s+(\w+)(?:\s+(.*))?)?\s*$")


def parse_task(path):
    """The directives the script needs: name, torch block, outputs, tolerances."""
    t = {"path": path, "name": None, "torch": [], "outputs": [], "tol": {}, "tol_all": None}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = DIRECTIVE.match(line.rstrip("\r\n"))
            if not m or not m.group(1):
                continue
            kw, rest = m.group(1), (m.group(2) or "").strip()
            if kw == "task":
                t["name"] = rest
            elif kw == "torch":
                t["torch"].append(rest)
            elif kw == "output":
                name, spec = rest.split(None, 1)
                t["outputs"].append((name, spec.split("[", 1)[0]))
            elif kw == "tol":
                words = rest.split()
                kv = dict(w.split("=", 1) for w in words if "=" in w)
                tol = (float(kv["rtol"]), float(kv["atol"]))
                named = [w for w in words if "=" not in w]
                if named:
                    t["tol"][named[0]] = tol
                else:
                    t["tol_all"] = tol
    return t


def tol_of(task, name, dt):
    if name in task["tol"]:
        return task["tol"][name]
    if task["tol_all"]:
        return task["tol_all"]
    return DEFAULT_TOL.get(dt, (0.0, 0.0))


def compile_block(lines, fname):
    """The torch block as a function of a dict of names: exec the statements, eval the last."""
    src = "\n".join(lines)
    tree = ast.parse(src, filename=fname, mode="exec")
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        raise ValueError(f"{fname}: the last torch line must be an expression")
    last = ast.Expression(tree.body[-1].value)
    stmts = ast.Module(tree.body[:-1], type_ignores=[])
    code_s = compile(stmts, fname, "exec")
    code_e = compile(last, fname, "eval")

    def run(env):
        scope = dict(env)
        scope.update(torch=torch, F=F, math=math)
        exec(code_s, scope)
        return eval(code_e, scope)

    return run


def load_workload(d):
    """Tensors (on the GPU) and names of one dumped workload."""
    with open(os.path.join(d, "manifest.json"), encoding="utf-8") as f:
        man = json.load(f)
    env, outs = {}, {}
    env.update({k: int(v) for k, v in man.get("sizes", {}).items()})
    env.update(man.get("scalars", {}))
    for t in man["tensors"]:
        dt = DTYPES[t["dtype"]]
        raw = open(os.path.join(d, t["file"]), "rb").read()
        x = torch.frombuffer(bytearray(raw), dtype=dt) if raw else torch.empty(0, dtype=dt)
        x = x.reshape(t["shape"]).cuda()
        if t["role"] == "input":
            env[t["name"]] = x
        elif t["role"] == "output":
            outs[t["name"]] = (x, t["dtype"])
    return man, env, outs


def as_tuple(r):
    return tuple(r) if isinstance(r, (tuple, list)) else (r,)


def compare(ref, got, dt, rtol, atol):
    """kevo's rule with the torch result as the truth; returns (ok, max_abs, rel_l2, n_bad)."""
    got = got.reshape(ref.shape)
    if dt not in DEFAULT_TOL:  # integers and bool: exact
        bad = int((ref.to(torch.int64) != got.to(torch.int64)).sum())
        return bad == 0, float(bad > 0), 0.0, bad
    r, g = ref.double(), got.double()
    fin = torch.isfinite(g)
    d = (r - g).abs()
    bad_el = ~(d <= atol + rtol * g.abs()) & fin
    bad_el |= ~fin & ~((r == g) | (torch.isnan(r) & torch.isnan(g)))
    dd, gg = torch.where(fin, r - g, 0.0), torch.where(fin, g, 0.0)
    gn = float(gg.norm())
    l2 = float(dd.norm()) / gn if gn > 0 else float(dd.norm())
    n_bad = int(bad_el.sum())
    max_abs = float(torch.where(fin, d, 0.0).max()) if d.numel() else 0.0
    return n_bad == 0 and (gn == 0 or l2 <= rtol), max_abs, l2, n_bad


def upcast(env):
    return {k: (v.double() if torch.is_tensor(v) and v.is_floating_point() else v)
            for k, v in env.items()}


def validate(task, run, env, outs):
    """Check the reference's outputs against the block, natively then in float64."""
    report = {}
    for mode in ("native", "float64"):
        try:
            res = as_tuple(run(env if mode == "native" else upcast(env)))
        except Exception as e:  # the block itself is wrong for this task
            report[mode] = {"error": f"{type(e).__name__}: {e}"}
            continue
        if len(res) != len(task["outputs"]):
            report[mode] = {"error": f"block gave {len(res)} outputs, task has "
                                     f"{len(task['outputs'])}"}
            continue
        per, ok = {}, True
        for (name, dt), got in zip(task["outputs"], res):
            ref, _ = outs[name]
            rtol, atol = tol_of(task, name, dt)
            o, mx, l2, nb = compare(ref, got, dt, rtol, atol)
            zero_ok = float(((ref.double().abs() * (1 - rtol)) <= atol).float().mean()) \
                if dt in DEFAULT_TOL and ref.numel() else 0.0
            per[name] = {"ok": o, "max_abs": mx, "rel_l2": l2, "n_bad": nb,
                         "zero_passes_elementwise": zero_ok}
            ok = ok and o
        report[mode] = {"ok": ok, "outputs": per}
        if ok:
            break
    report["ok"] = any(isinstance(v, dict) and v.get("ok") for v in report.values())
    return report


class Flusher:
    def __init__(self):
        l2 = torch.cuda.get_device_properties(0).L2_cache_size or (50 << 20)
        self.buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")

    def __call__(self):
        self.buf.zero_()


def time_fn(fn, flush, min_samples=10, max_samples=200, budget_s=1.0):
    """Median seconds of fn() over samples, each after an L2 flush."""
    fn()
    torch.cuda.synchronize()
    ts, t0 = [], time.time()
    while len(ts) < max_samples and (len(ts) < min_samples or time.time() - t0 < budget_s):
        flush()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    ts.sort()
    n = len(ts)
    return ts[n // 2] if n % 2 else 0.5 * (ts[n // 2 - 1] + ts[n // 2])


def dump(kevo, path, d):
    cmd = [kevo, "eval", path, "--dump", d, "--no-timing", "--holdout", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-2000:]}")
    doc = json.loads(p.stdout)
    return doc["reference"]["verdict"], doc["reference"].get("message", "")


def bench_task(args, path, flush, log):
    task = parse_task(path)
    name = task["name"] or os.path.splitext(os.path.basename(path))[0]
    entry = {"path": path, "workloads": []}
    if not task["torch"]:
        entry["error"] = "no torch line"
        return name, entry
    run = compile_block(task["torch"], path)
    has_loop = any(re.search(r"\bfor\b|\bwhile\b", ln) for ln in task["torch"])
    with tempfile.TemporaryDirectory(prefix="kevo-dump-") as d:
        entry["reference_verdict"], msg = dump(args.kevo, path, d)
        if entry["reference_verdict"] != "ok":
            entry["error"] = f"kevo's reference check: {msg}"
        wdirs = sorted((w for w in os.listdir(d) if w.startswith("w")), key=lambda w: int(w[1:]))
        for k, w in enumerate(wdirs):
            man, env, outs = load_workload(os.path.join(d, w))
            row = {"index": man["workload"], "sizes": man["sizes"],
                   "holdout": bool(man.get("holdout"))}
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
            row["validation"] = validate(task, run, env, outs)
            if not row["holdout"] and path.endswith(".cu"):  # C tasks: validated, not timed
                row["eager_s"] = time_fn(lambda: run(env), flush)
                if args.compile_workloads > k and not has_loop and not args.no_compile:
                    try:
                        keys = sorted(env)
                        cf = torch.compile(lambda *a: run(dict(zip(keys, a))), dynamic=False)
                        vals = [env[k2] for k2 in keys]
                        t0 = time.time()
                        cf(*vals)
                        row["compile_build_s"] = time.time() - t0
                        row["compile_s"] = time_fn(lambda: cf(*vals), flush)
                    except Exception as e:
                        row["compile_error"] = f"{type(e).__name__}: {str(e)[:300]}"
                elif has_loop:
                    row["compile_error"] = "skipped: the torch block has a Python loop"
            v = row["validation"]
            log(f"  w{row['index']} {json.dumps(row['sizes'])}: reference "
                f"{'matches' if v['ok'] else 'DIFFERS FROM'} torch"
                + (f" (float64)" if v['ok'] and not v.get('native', {}).get('ok') else "")
                + (f"; eager {row['eager_s'] * 1e6:.1f} us" if 'eager_s' in row else "")
                + (f", compile {row['compile_s'] * 1e6:.1f} us" if 'compile_s' in row else ""))
            if not v["ok"]:
                log("    " + json.dumps({m: v[m] for m in ("native", "float64") if m in v})[:1500])
            entry["workloads"].append(row)
            del env, outs
            torch.cuda.empty_cache()
    entry["reference_matches_torch"] = bool(entry["workloads"]) and all(
        r["validation"]["ok"] for r in entry["workloads"])
    return name, entry


def task_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    if f.endswith(".cu") or f.endswith(".c"):
                        yield os.path.join(root, f)
        else:
            yield p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*", default=["tasks"])
    ap.add_argument("--kevo", default="build/kevo")
    ap.add_argument("--out", default="baselines.json")
    ap.add_argument("--compile-workloads", type=int, default=1,
                    help="torch.compile only the first N workloads of a task (compiling is slow)")
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()

    def log(s):
        print(s, flush=True)

    flush = Flusher()
    doc = {"kevo_baselines": 1, "device": torch.cuda.get_device_name(0),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "torch_version": torch.__version__, "command": " ".join(sys.argv), "tasks": {}}
    n_bad = 0
    for path in task_files(args.paths):
        log(f"{path}")
        try:
            name, entry = bench_task(args, path, flush, log)
        except Exception as e:
            name = os.path.splitext(os.path.basename(path))[0]
            entry = {"path": path, "error": f"{type(e).__name__}: {e}", "workloads": []}
            log(f"  ERROR {entry['error'][:500]}")
        n_bad += not entry.get("reference_matches_torch", False)
        doc["tasks"][name] = entry
        with open(args.out, "w", encoding="utf-8") as f:  # after every task: nothing lost
            json.dump(doc, f, indent=1)
    log(f"{len(doc['tasks'])} tasks, {len(doc['tasks']) - n_bad} references match torch; "
        f"wrote {args.out}")
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main())
