#!/usr/bin/env python3
"""mcp_session.py - an agent-style session through `kevo mcp` (docs/agents.md), printing
every request and response.

A plain MCP client over pipes (Python 3 standard library only), doing what a coding agent
does: initialize, list the tools, read the device's calibration, check and evaluate a
task's seed, ask for the improve prompt kevo would send, check and evaluate an improved
version naming the seed as its parent (with the held-out sizes), look at the run's
candidates, and export the winner (the faster of the two that passed).

usage (from the repository's root):
  bench/scripts/mcp_session.py --kevo build/kevo                    # the H100 session:
      # tasks/level1/softmax_rows.cu, examples/seeds/softmax_rows.cu,
      # bench/scripts/softmax_rows_vec4.cu
  bench/scripts/mcp_session.py --kevo build/kevo --task tasks/cpu/cpu_softmax_rows.c \\
      --seed examples/seeds/cpu_softmax_rows.c \\
      --improved bench/scripts/cpu_softmax_rows_fastmath.c --time-cap 0.2   # on a CPU

The archive and the export go to a fresh directory under --out (default /tmp), which the
server is allowed to write (--allow). Exit status 0 when both evaluations got a verdict
and a winner was exported, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

MAX_SHOWN = 400000   # characters of one message printed (tools/list and prompts are long)


class Client:
    """JSON-RPC 2.0 over the server's stdin and stdout, one message per line."""

    def __init__(self, argv):
        print("$ " + " ".join(argv), flush=True)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.next_id = 1

    def send(self, msg):
        line = json.dumps(msg)
        print("\n>>> " + line[:MAX_SHOWN], flush=True)
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def request(self, method, params=None):
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.next_id += 1
        t0 = time.monotonic()
        self.send(msg)
        line = self.proc.stdout.readline()
        if not line:
            sys.exit("kevo mcp closed its stdout")
        print("<<< (%.2f s) %s" % (time.monotonic() - t0, line.rstrip()[:MAX_SHOWN]), flush=True)
        resp = json.loads(line)
        if resp.get("id") != msg["id"]:
            sys.exit("answer to another request: %r" % resp.get("id"))
        if "error" in resp:
            sys.exit("%s: error %s" % (method, resp["error"]))
        return resp["result"]

    def tool(self, name, **args):
        res = self.request("tools/call", {"name": name, "arguments": args})
        print("--- %s says:\n%s" % (name, res["content"][0]["text"].rstrip()), flush=True)
        if res.get("isError"):
            sys.exit("%s failed" % name)
        return res["structuredContent"]

    def close(self):
        self.proc.stdin.close()
        return self.proc.wait(timeout=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kevo", default="build/kevo")
    ap.add_argument("--task", default="tasks/level1/softmax_rows.cu")
    ap.add_argument("--seed", default="examples/seeds/softmax_rows.cu")
    ap.add_argument("--improved", default="bench/scripts/softmax_rows_vec4.cu")
    ap.add_argument("--out", default=tempfile.gettempdir(), help="where the scratch dir goes")
    ap.add_argument("--time-cap", type=float, default=0,
                    help="timing cap per kernel and workload, seconds (default kevo's)")
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="kevo-mcp-session-", dir=a.out)
    backend = "cpu" if a.task.endswith(".c") else "cuda"
    c = Client([a.kevo, "mcp", "--archive", os.path.join(work, "archive.db"), "--allow", work])
    print("# %s, kevo mcp session on %s (%s backend), scratch %s"
          % (time.strftime("%Y-%m-%d %H:%M:%S"), a.task, backend, work), flush=True)

    init = c.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "mcp_session.py", "version": "1"}})
    print("# server %s %s, protocol %s" % (init["serverInfo"]["name"],
                                           init["serverInfo"]["version"],
                                           init["protocolVersion"]))
    c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    tools = c.request("tools/list")["tools"]
    print("# tools: " + ", ".join(t["name"] for t in tools))
    c.request("resources/read", {"uri": "kevo://calibration/" + backend})

    timing = {"time_cap_s": a.time_cap} if a.time_cap > 0 else {}
    c.tool("check", task=a.task, candidate=a.seed)
    seed = c.tool("eval", task=a.task, candidate=a.seed, holdout=True, **timing)
    c.tool("prompt", op="improve", candidate_id=seed["candidate"])
    c.tool("check", task=a.task, candidate=a.improved)
    imp = c.tool("eval", task=a.task, candidate=a.improved, parent=seed["candidate"],
                 holdout=True, **timing)
    c.tool("runs", run=seed["run"], candidates=True)

    ok = [r for r in (seed, imp) if r["verdict"] == "ok" and r["summary"]]
    print("\n# seed: %s, %s; improved: %s, %s" % (
        seed["verdict"], "%.2fx" % seed["summary"]["speedup"] if seed["summary"] else "-",
        imp["verdict"], "%.2fx" % imp["summary"]["speedup"] if imp["summary"] else "-"))
    if not ok:
        print("# no candidate passed: nothing to export")
        c.close()
        return 1
    win = max(ok, key=lambda r: r["summary"]["speedup"])
    print("# winner: candidate %d (%.2fx the reference, %.1f%% of SOL)"
          % (win["candidate"], win["summary"]["speedup"], 100 * win["summary"]["sol_fraction"]))
    c.tool("show", candidate=win["candidate"])
    exp = c.tool("export", run=win["run"], candidate=win["candidate"],
                 out=os.path.join(work, "export"))
    for f in exp["files"]:
        print("# exported " + f)
    rc = c.close()
    print("\n# kevo mcp exited %d" % rc)
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
