"""Remote MCP servers through the unmodified google-genai SDK and a real `hookbox serve`, whose
offline agent calls a FastMCP server (`docs_server.py`) on 127.0.0.1.

1. a call goes through the environment's egress proxy: the allowlist entry's transform header
   reaches the server (and the server's echo of it is scrubbed from the result), and so do the
   request's own headers, sent as given;
2. the header's secret never appears in the stored interaction (its tools are echoed redacted)
   nor in a trigger that would send it at every run;
3. `allowed_tools` filters what the model sees: a tool left out cannot be called;
4. a hanging tool is a clean time-out error (--mcp-timeout 3), and the interaction completes;
5. an environment whose allowlist does not admit the server: a clear tool error, completed;
6. hooks: `*` matchers never fire for MCP tools, an `mcp:docs/search` matcher does (its deny
   reaches the model, and the server never sees the call);
7. tool search (google-genai 3.6.1 `defer_loading` on `mcp_server`): the server's tools are not
   callable until a search loads them, and then are.

argv: HOOKBOX_BIN DATA_DIR. Ends with `N passed, M failed`.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import warnings

from google import genai

warnings.simplefilter("ignore")
hookbox, data = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
AGENT = "antigravity-preview-09-2026"
SECRET = "sekrit-123"
results = []


def check(name, ok, detail=""):
    results.append((name, bool(ok)))
    print(("ok  " if ok else "FAIL") + " " + name + ("" if ok else f": {detail}"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


port = free_port()
calls_file = os.path.join(data, "calls.jsonl")
docs = subprocess.Popen([sys.executable, os.path.join(here, "docs_server.py"), str(port), calls_file],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def calls():
    try:
        with open(calls_file) as f:
            return [json.loads(line) for line in f]
    except FileNotFoundError:
        return []


def up():
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


deadline = time.monotonic() + 60
while not up() and docs.poll() is None and time.monotonic() < deadline:
    time.sleep(0.2)
if not up():
    print("the FastMCP server did not start")
    print("0 passed, 1 failed")
    sys.exit(1)

proc = subprocess.Popen(
    [hookbox, "serve", "--listen", "127.0.0.1:0", "--data-dir", os.path.join(data, "hb"),
     "--egress-allow-cidr", "127.0.0.1/32", "--mcp-timeout", "3"],
    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    env={k: v for k, v in os.environ.items() if k != "GEMINI_API_KEY"},
)
base = None
for line in proc.stdout:
    if line.startswith("hookbox is listening on http://"):
        base = line.split()[4]
    if line.startswith("or set "):
        break
client = genai.Client(api_key="local", http_options={"base_url": base, "api_version": "v1beta"})

HOOKS = json.dumps({
    "star": {"pre_tool_execution": [{"matcher": "*", "hooks": [
        {"type": "command", "command": "echo '{\"decision\": \"deny\", \"reason\": \"star matched\"}'"}]}]},
    "mcp": {"pre_tool_execution": [{"matcher": "mcp:docs/search", "hooks": [
        {"type": "command", "command": "python3 /.agents/mcp_gate.py"}]}]},
})
GATE = r'''
import json, sys
call = json.load(sys.stdin)["tool_call"]
if "forbidden" in call["args"].get("query", ""):
    print(json.dumps({"decision": "deny", "reason": "forbidden topic for " + call["name"]}))
else:
    print(json.dumps({"decision": "allow"}))
'''
SOURCES = [{"type": "inline", "target": ".agents/hooks.json", "content": HOOKS},
           {"type": "inline", "target": ".agents/mcp_gate.py", "content": GATE}]
ADMITTED = {"type": "remote", "sources": SOURCES, "network": {"allowlist": [
    {"domain": "127.0.0.1", "transform": {"X-Injected": "by-egress"}}]}}
NOT_ADMITTED = {"type": "remote", "sources": SOURCES, "network": {"allowlist": [{"domain": "example.com"}]}}
DOCS = {"type": "mcp_server", "name": "docs", "url": f"http://127.0.0.1:{port}/mcp",
        "headers": {"X-Api-Key": SECRET}, "allowed_tools": [{"tools": ["search", "hang"]}]}


def run(input, environment):
    return client.interactions.create(agent=AGENT, input=input, environment=environment, tools=[DOCS])


def step(i, kind):
    return next((s for s in i.steps if s.type == kind), None)


def raw(path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read().decode()


try:
    # 1 + 2.
    done = run('call `docs__search` with `{"query": "hooks"}`', ADMITTED)
    call, result = step(done, "mcp_server_tool_call"), step(done, "mcp_server_tool_result")
    check("call: completed with an mcp_server_tool_call and its result", done.status == "completed"
          and call is not None and call.server_name == "docs" and call.name == "search"
          and result is not None and result.call_id == call.id, done)
    text = result.result if result else ""
    check("call: the server answered", "3 results for hooks" in str(text), text)
    check("egress: the allowlist's transform header reached the server (through the proxy)",
          any(c["tool"] == "search" and c["injected"] == "by-egress" for c in calls()), calls())
    check("egress: the server's echo of the injected value is scrubbed from the result",
          "injected: [redacted]" in str(text) and "by-egress" not in str(text), text)
    check("headers: the request's header reached the server as given", "key ok: True" in str(text), text)
    stored = raw(f"/v1beta/interactions/{done.id}")
    check("headers: the secret is in no stored step or echo", SECRET not in stored
          and "[redacted]" in stored, stored[:400])
    check("hooks: a `*` matcher does not fire for MCP tools", "star matched" not in stored, stored[:400])
    trigger = json.loads(raw("/v1beta/triggers", {"schedule": "0 0 1 1 *", "time_zone": "UTC", "interaction": {
        "agent": AGENT, "input": "call `docs__search`", "tools": [DOCS]}}))
    shown = raw(f"/v1beta/triggers/{trigger['id']}") + raw("/v1beta/triggers")
    check("headers: a trigger shows them redacted", SECRET not in json.dumps(trigger) and SECRET not in shown
          and "[redacted]" in shown, shown[:300])

    # 3. allowed_tools.
    before = len(calls())
    done = run("call `docs__secret`", ADMITTED)
    res = step(done, "function_result") or step(done, "mcp_server_tool_result")
    check("allowed_tools: a tool left out is not offered", done.status == "completed"
          and res is not None and res.is_error and "not available" in str(res.result), done)
    check("allowed_tools: the server never got the call", all(c["tool"] != "secret" for c in calls()[before:]), calls())

    # 4. A hanging tool.
    started = time.monotonic()
    done = run("call `docs__hang`", ADMITTED)
    res = step(done, "mcp_server_tool_result")
    check("timeout: a clean error result, and the interaction completes", done.status == "completed"
          and res is not None and res.is_error and "within 3 s" in str(res.result), done)

    # 5. Not admitted by the allowlist.
    done = run('call `docs__search` with `{"query": "x"}`', NOT_ADMITTED)
    res = step(done, "mcp_server_tool_result")
    check("egress: a server the allowlist does not admit is a clear tool error", done.status == "completed"
          and res is not None and res.is_error and "egress policy" in str(res.result)
          and "allowlist" in str(res.result), done)

    # 6. An mcp: matcher gates the call.
    before = len(calls())
    done = run('call `docs__search` with `{"query": "forbidden things"}`', ADMITTED)
    res = step(done, "mcp_server_tool_result")
    check("hooks: an mcp:docs/search matcher denies, and the model sees why", res is not None and res.is_error
          and "forbidden topic for mcp:docs/search" in str(res.result), done)
    check("hooks: the denied call never reached the server",
          all("forbidden" not in json.dumps(c) for c in calls()[before:]), calls())

    # 7. Deferred MCP tools and tool search.
    DEFERRED = [{"type": "tool_search"}, {**DOCS, "defer_loading": True}]
    before = len(calls())
    done = client.interactions.create(agent=AGENT, input='call `docs__search` with `{"query": "early"}`',
                                      environment=ADMITTED, tools=DEFERRED)
    res = step(done, "function_result")
    check("tool search: a deferred MCP tool is not callable before a search", done.status == "completed"
          and res is not None and res.is_error and "not loaded" in str(res.result), done)
    check("tool search: the server never got the early call", all(c["args"].get("query") != "early"
                                                                  for c in calls()[before:]), calls())
    done = client.interactions.create(
        agent=AGENT, input='search `search the docs` then call `docs__search` with `{"query": "deferred"}`',
        environment=ADMITTED, tools=DEFERRED)
    found = step(done, "tool_search_result")
    res = step(done, "mcp_server_tool_result")
    check("tool search: a server-side search loads the MCP tool by its description",
          found is not None and [f.name for f in found.result] == ["docs__search"], done)
    check("tool search: the loaded MCP tool is then called through the server",
          done.status == "completed" and res is not None and not res.is_error
          and "3 results for deferred" in str(res.result), done)

    # Bad declarations are 400s naming the field.
    for bad, needle in [({**DOCS, "url": "ftp://x"}, "url"), ({**DOCS, "name": "a b"}, "name"),
                        ({**DOCS, "headers": {"X": "a\nb"}}, "headers")]:
        try:
            client.interactions.create(agent=AGENT, input="hi", tools=[bad])
            check(f"400: {needle}", False, "accepted")
        except Exception as e:
            check(f"400: a bad mcp_server {needle}", "400" in str(e) and needle in str(e), str(e))
finally:
    proc.terminate()
    proc.wait()
    docs.kill()
    docs.wait()

passed = sum(1 for _, ok in results if ok)
failed = len(results) - passed
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
