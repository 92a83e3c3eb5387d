"""The model behind the four agent CLIs in tests/agent_clis: one HTTP server on 127.0.0.1 that
speaks each CLI's model API well enough for one turn with one shell call.

  Gemini API         POST .../models/<m>:streamGenerateContent?alt=sse (SSE), :generateContent,
                     :countTokens                                         (Gemini CLI)
  Anthropic          POST /v1/messages (SSE when "stream": true), /v1/messages/count_tokens
                                                                          (Claude Code)
  OpenAI Responses   POST .../responses (SSE)                             (Codex)
  OpenAI Chat        POST .../chat/completions (SSE when "stream": true)  (Copilot)
  GET .../models     a one-model list

What it answers is decided from each request alone (no state): the user's prompt carries
`<<run:COMMAND>>` and `<<case:ID>>`. When the request offers the CLI's shell tool and holds no
tool result yet, the answer is one call of that tool running COMMAND; otherwise (the tool's
result is back, or a side request such as a title) it is the text FINAL_TEXT. Every request is
appended, with its case, to the JSON Lines file --log names, so the test reads what each CLI
told the model (the tool result after a denied call carries the hook's reason).

Usage: fake_model.py --log FILE --port-file FILE   (writes the port once it listens)
"""

import argparse
import json
import os
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FINAL_TEXT = "FAKE-MODEL-FINAL-TEXT"
# The shell tool of each CLI, as offered to the model.
SHELL_TOOLS = ("run_shell_command", "Bash", "exec_command", "bash")
RUN = re.compile(r"<<run:(.*?)>>")
CASE = re.compile(r"<<case:([A-Za-z0-9_.-]+)>>")
MAX_BODY = 64 << 20

LOCK = threading.Lock()
LOG = None


def record(entry):
    with LOCK:
        with open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")


def tool_names(body):
    names = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        for fd in t.get("functionDeclarations") or t.get("function_declarations") or []:
            names.append(fd.get("name"))
        names.append(t.get("name"))
        if isinstance(t.get("function"), dict):
            names.append(t["function"].get("name"))
    return [n for n in names if n]


def has_tool_result(kind, body):
    if kind == "gemini":
        return any("functionResponse" in p for c in body.get("contents") or []
                   for p in c.get("parts") or [])
    if kind == "anthropic":
        return any(isinstance(b, dict) and b.get("type") == "tool_result"
                   for m in body.get("messages") or [] if isinstance(m.get("content"), list)
                   for b in m["content"])
    if kind == "responses":
        items = body.get("input")
        return isinstance(items, list) and any(
            isinstance(i, dict) and str(i.get("type", "")).endswith("_output") for i in items)
    if kind == "chat":
        return any(m.get("role") == "tool" for m in body.get("messages") or [])
    return False


def shell_args(tool, command):
    if tool == "exec_command":
        return {"cmd": command}
    return {"command": command, "description": "run the command the user asked for"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _json(self, obj, code=200):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse_start(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _sse(self, data, event=None):
        text = f"event: {event}\n" if event else ""
        text += "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
        self.wfile.write(text.encode())
        self.wfile.flush()

    def do_GET(self):
        record({"t": time.time(), "method": "GET", "path": self.path})
        self._json({"object": "list", "data": [
            {"id": "fake-model", "object": "model", "created": 0, "owned_by": "test"}],
            "models": []})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self._json({"error": "too large"}, 413)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        if ":countTokens" in path:
            return self._json({"totalTokens": 10})
        if path.endswith("/messages/count_tokens"):
            return self._json({"input_tokens": 10})
        if ":streamGenerateContent" in path:
            kind, stream = "gemini", True
        elif ":generateContent" in path:
            kind, stream = "gemini", False
        elif path.endswith("/messages"):
            kind, stream = "anthropic", bool(body.get("stream"))
        elif path.endswith("/responses"):
            kind, stream = "responses", body.get("stream", True) is not False
        elif path.endswith("/chat/completions"):
            kind, stream = "chat", bool(body.get("stream"))
        else:
            return self._json({"error": "unknown path"}, 404)
        text = json.dumps(body)
        run, case = RUN.search(text), CASE.search(text)
        tool = next((t for t in SHELL_TOOLS if t in tool_names(body)), None)
        command = json.loads('"' + run.group(1) + '"') if run else None
        call = tool is not None and command is not None and not has_tool_result(kind, body)
        record({"t": time.time(), "method": "POST", "path": self.path, "kind": kind,
                "case": case.group(1) if case else None,
                "answer": f"tool:{tool}" if call else "text", "body": body})
        getattr(self, "answer_" + kind)(body, stream, tool if call else None, command)

    def answer_gemini(self, body, stream, tool, command):
        gc = body.get("generationConfig") or {}
        schema = gc.get("responseJsonSchema") or gc.get("responseSchema")
        if tool:
            parts = [{"functionCall": {"name": tool, "args": shell_args(tool, command)}}]
        elif schema:
            parts = [{"text": json.dumps(fill_schema(schema))}]
        else:
            parts = [{"text": FINAL_TEXT}]
        resp = {"candidates": [{"content": {"role": "model", "parts": parts},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                                  "totalTokenCount": 15},
                "modelVersion": "fake-model", "responseId": uuid.uuid4().hex}
        if not stream:
            return self._json(resp)
        self._sse_start()
        self._sse(resp)

    def answer_anthropic(self, body, stream, tool, command):
        mid = "msg_" + uuid.uuid4().hex[:20]
        model = body.get("model", "fake-model")
        usage = {"input_tokens": 10, "output_tokens": 5,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if tool:
            block = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20], "name": tool,
                     "input": shell_args(tool, command)}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": FINAL_TEXT}
            stop = "end_turn"
        if not stream:
            return self._json({"id": mid, "type": "message", "role": "assistant",
                               "model": model, "content": [block], "stop_reason": stop,
                               "stop_sequence": None, "usage": usage})
        self._sse_start()
        self._sse({"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": usage}}, "message_start")
        if tool:
            self._sse({"type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": block["id"], "name": tool, "input": {}}},
                "content_block_start")
            self._sse({"type": "content_block_delta", "index": 0, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}},
                "content_block_delta")
        else:
            self._sse({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}}, "content_block_start")
            self._sse({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": FINAL_TEXT}},
                      "content_block_delta")
        self._sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        self._sse({"type": "message_delta", "delta": {"stop_reason": stop,
                                                      "stop_sequence": None},
                   "usage": {"output_tokens": 5}}, "message_delta")
        self._sse({"type": "message_stop"}, "message_stop")

    def answer_responses(self, body, stream, tool, command):
        rid = "resp_" + uuid.uuid4().hex[:20]
        if tool:
            item = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:20],
                    "call_id": "call_" + uuid.uuid4().hex[:20], "name": tool,
                    "arguments": json.dumps(shell_args(tool, command)), "status": "completed"}
        else:
            item = {"type": "message", "id": "msg_" + uuid.uuid4().hex[:20],
                    "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": FINAL_TEXT, "annotations": []}]}
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 15}
        done = {"id": rid, "object": "response", "created_at": int(time.time()),
                "model": body.get("model", "fake-model"), "status": "completed",
                "output": [item], "usage": usage}
        if not stream:
            return self._json(done)
        self._sse_start()
        self._sse({"type": "response.created", "sequence_number": 0,
                   "response": dict(done, status="in_progress", output=[], usage=None)},
                  "response.created")
        self._sse({"type": "response.output_item.done", "sequence_number": 1,
                   "output_index": 0, "item": item}, "response.output_item.done")
        self._sse({"type": "response.completed", "sequence_number": 2, "response": done},
                  "response.completed")

    def answer_chat(self, body, stream, tool, command):
        cid = "chatcmpl-" + uuid.uuid4().hex[:20]
        model = body.get("model", "fake-model")
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if tool:
            call = {"id": "call_" + uuid.uuid4().hex[:20], "type": "function",
                    "function": {"name": tool,
                                 "arguments": json.dumps(shell_args(tool, command))}}
            msg, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        else:
            msg, finish = {"role": "assistant", "content": FINAL_TEXT}, "stop"
        if not stream:
            return self._json({"id": cid, "object": "chat.completion",
                               "created": int(time.time()), "model": model,
                               "choices": [{"index": 0, "message": msg,
                                            "finish_reason": finish}], "usage": usage})
        self._sse_start()
        chunk = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                 "model": model}
        delta = {"role": "assistant", "content": msg["content"]}
        if tool:
            delta["tool_calls"] = [dict(call, index=0)]
        self._sse(dict(chunk, choices=[{"index": 0, "delta": delta, "finish_reason": None}]))
        self._sse(dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
        self._sse(dict(chunk, choices=[], usage=usage))
        self._sse("[DONE]")


def fill_schema(schema):
    """The smallest value a JSON schema accepts (Gemini CLI's structured side requests)."""
    if not isinstance(schema, dict):
        return "fake"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        return {k: fill_schema(v) for k, v in (schema.get("properties") or {}).items()}
    return {"array": [], "integer": 1, "number": 1, "boolean": False}.get(kind, "fake")


def main():
    global LOG
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()
    LOG = args.log
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(args.port_file + ".partial", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(args.port_file + ".partial", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
