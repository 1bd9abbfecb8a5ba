#!/usr/bin/env python3
"""scripted_llm.py DIR PORT LOG - an OpenAI-compatible chat-completions server on 127.0.0.1:PORT
that answers each prompt by what it asks, with the text of DIR/{generate,fix,improve,plan,other}.md,
and appends one JSON line per request to LOG. It stands in for a model where none can be
reached (the GPU machine has no network): the LLM operators' whole path runs for real
(prompts built from measurements, replies applied, candidates evaluated on the GPU), only
the model's answers are canned (tools/llm-scripted-gpu.sh)."""
import http.server
import json
import sys
import threading

reply_dir, port, log_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()


def pick(text):
    if "Write a first fast implementation" in text:
        return "generate"
    if "This candidate fails. Fix it" in text:
        return "fix"
    if "Make this candidate faster" in text or "Implement exactly this strategy" in text:
        return "improve"
    if "choose ONE optimization strategy" in text:
        return "plan"
    return "other"


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        req = json.loads(body)
        text = "\n".join(m.get("content", "") for m in req.get("messages", []))
        kind = pick(text)
        with open(f"{reply_dir}/{kind}.md") as f:
            reply = f.read()
        with lock, open(log_path, "a") as f:
            f.write(json.dumps({"model": req.get("model"), "asked": kind, "prompt_bytes": len(text)}) + "\n")
        out = json.dumps({
            "id": "scripted", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(text) // 4, "completion_tokens": len(reply) // 4},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
