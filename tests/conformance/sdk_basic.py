"""Basic conformance of `hookbox serve` with the unmodified google-genai SDK.

Run by run.sh against a fresh server with the offline agent and the API key in HOOKBOX_TEST_KEY.
Covers interactions (create, get, stream, resume, background, cancel, delete, errors),
environments (create, get, list, files list/download/upload, fork, delete), credentials
(secrets write-only) and agents. The reference documentation's three examples are checked by
reference_check.py (run.sh --reference).
"""

import json
import os
import sys
import urllib.request
import warnings

from google import genai

warnings.simplefilter("ignore")

BASE = os.environ["HOOKBOX_BASE_URL"]
KEY = os.environ["HOOKBOX_TEST_KEY"]
AGENT = "antigravity-preview-09-2026"

client = genai.Client(api_key=KEY, http_options={"base_url": BASE, "api_version": "v1beta"})
failures = []
passes = 0


def check(name, cond, detail=""):
    global passes
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f": {detail}"))
    if cond:
        passes += 1
    else:
        failures.append(name)


def expect_error(name, fn, status, needle):
    try:
        fn()
    except Exception as e:  # the SDK's exception classes differ between versions
        text = str(e)
        check(name, str(status) in text and needle in text, text)
        return
    check(name, False, "no exception")


# --- interactions ------------------------------------------------------------------------
env_spec = {
    "type": "remote",
    "sources": [
        {"type": "inline", "target": "workspace/notes.txt", "content": "alpha beta"},
        {"type": "inline", "target": "workspace/data.bin", "content": "aGk=", "encoding": "base64"},
    ],
}
i1 = client.interactions.create(agent=AGENT, input="Read `/workspace/notes.txt`.", environment=env_spec)
check("create: completed", i1.status == "completed", i1.status)
check("create: output_text has the file", "alpha beta" in i1.output_text, i1.output_text)
check("create: environment_id", bool(i1.environment_id) and i1.environment_id.startswith("env_"), i1.environment_id)
check("create: steps typed", [s.type for s in i1.steps][:2] == ["user_input", "function_call"], [s.type for s in i1.steps])

i2 = client.interactions.create(
    agent=AGENT,
    input="Run `cat data.bin` please.",
    environment=i1.environment_id,
    previous_interaction_id=i1.id,
)
check("continue: same environment", i2.environment_id == i1.environment_id, i2.environment_id)
check("continue: base64 source decoded", i2.output_text.endswith("hi"), i2.output_text)

got = client.interactions.get(i1.id)
check("get: same output_text", got.output_text == i1.output_text, got.output_text)

events = list(client.interactions.create(agent=AGENT, input="run `echo streamed`", environment=i1.environment_id, stream=True))
kinds = [e.event_type for e in events]
check("stream: created first, completed last", kinds[0] == "interaction.created" and kinds[-1] == "interaction.completed", kinds)
check("stream: has step events", "step.start" in kinds and "step.delta" in kinds and "step.stop" in kinds, kinds)
created = events[0].interaction
check("stream: environment_id on created", getattr(created, "environment_id", None) == i1.environment_id, created)
texts = [e.delta.text for e in events if e.event_type == "step.delta" and getattr(e.delta, "type", "") == "text"]
check("stream: text delta", any("streamed" in t for t in texts), texts)
sid = created.id
# Pieces of running output (event_id "<start>.<offset>") are live only; the rest replays alike.
pieces = [e for e in events if "." in (e.event_id or "")]
check("stream: output streamed while running", any("streamed" in getattr(e.delta, "result", "") for e in pieces), [e.event_id for e in events])
main = [e for e in events if "." not in (e.event_id or "")]
replayed = list(client.interactions.get(sid, stream=True))
check("stream: replay via get", [(e.event_type, e.event_id) for e in replayed] == [(e.event_type, e.event_id) for e in main], [e.event_type for e in replayed])
last_id = main[2].event_id
resumed = list(client.interactions.get(sid, stream=True, last_event_id=last_id))
check("stream: resume after last_event_id", len(resumed) == len(main) - 3, (len(resumed), len(main)))

bg = client.interactions.create(agent=AGENT, input="run `sleep 600`", background=True)
check("background: returns running", bg.status in ("in_progress", "queued"), bg.status)
cancelled = client.interactions.cancel(bg.id)
check("cancel: cancelled", cancelled.status == "cancelled", cancelled.status)
client.interactions.delete(bg.id)
expect_error("delete: then get is 404", lambda: client.interactions.get(bg.id), 404, "not found")

expect_error("error: unknown agent", lambda: client.interactions.create(agent="no-such-agent", input="x"), 400, "Unknown agent")
expect_error("error: unknown environment", lambda: client.interactions.create(agent=AGENT, input="x", environment="env_missing"), 404, "env_missing")
expect_error(
    "error: invalid source",
    lambda: client.interactions.create(agent=AGENT, input="x", environment={"type": "remote", "sources": [{"type": "inline", "target": "../../x", "content": "x"}]}),
    400,
    "Invalid source",
)

bad = genai.Client(api_key="wrong-key", http_options={"base_url": BASE, "api_version": "v1beta"})
expect_error("auth: wrong key rejected", lambda: bad.interactions.get(i1.id), 401, "API key")

# --- environments ------------------------------------------------------------------------
env = client.environments.create(sources=[{"type": "inline", "target": "a.txt", "content": "hi"}], network="disabled")
check("env create", env.id.startswith("env_") and env.file_count == 1, env)
check("env get", client.environments.get(env.id).id == env.id)
listed = client.environments.list(page_size=100)
check("env list", any(e.id == env.id for e in listed.environments))
files = client.environments.files.list(env.id, "", recursive=True)
# Every sandbox environment starts with /.agents, /tmp and /workspace.
check("files list", [f.path for f in files.files] == ["/.agents", "/a.txt", "/tmp", "/workspace"], [f.path for f in files.files])
check("files download", client.environments.files.download(environment=env.id, path="a.txt") == b"hi")
client.environments.files.upload(environment=env.id, path="up/load.txt", file=b"uploaded bytes", mime_type="text/plain")
check("files upload", client.environments.files.download(environment=env.id, path="/up/load.txt") == b"uploaded bytes")
fork = client.environments.create(from_environment=f"environments/{env.id}")
check("env fork", fork.id != env.id and client.environments.files.download(environment=fork.id, path="up/load.txt") == b"uploaded bytes")
client.environments.delete(env.id)
expect_error("env delete", lambda: client.environments.get(env.id), 404, "not found")

# --- credentials -------------------------------------------------------------------------
c = client.credentials.create(type="bearer_token", id="cred_conf", token="sup3r-s3cret")
check("cred create", c.id == "cred_conf" and c.status == "active", c)
dumped = json.dumps([c.model_dump(mode="json"), client.credentials.get("cred_conf").model_dump(mode="json"), client.credentials.list().model_dump(mode="json")])
check("cred secrets never returned", "sup3r" not in dumped, dumped)
client.credentials.update(id="cred_conf", update_mask="token", type="bearer_token", token="n3w")
check("cred update", client.credentials.get("cred_conf").update_time is not None)
client.credentials.delete("cred_conf")
expect_error("cred delete", lambda: client.credentials.get("cred_conf"), 404, "not found")

# --- agents ------------------------------------------------------------------------------
a = client.agents.create(id="conf_agent", base_agent=AGENT, description="d", system_instruction="s", tools=[{"type": "code_execution"}])
check("agent create", a.id == "conf_agent")
check("agent list", any(x.id == "conf_agent" for x in client.agents.list().agents))
via = client.interactions.create(agent="conf_agent", input="run `echo via-agent`")
check("agent used by interaction", "via-agent" in via.output_text, via.output_text)
client.agents.delete("conf_agent")
expect_error("agent delete", lambda: client.agents.get("conf_agent"), 404, "not found")

# --- function tools (the client runs them) -----------------------------------------------
weather = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
clock = {"type": "function", "name": "get_time", "description": "The time in a city.",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
asked = client.interactions.create(
    agent=AGENT, tools=[{"type": "code_execution"}, weather, clock],
    input='call `get_weather` with `{"city": "Berlin"}` and call `get_time` with `{"city": "Berlin"}`')
calls = [s for s in asked.steps if s.type == "function_call"]
check("function: the turn ends requires_action", asked.status == "requires_action", asked.status)
check("function: both calls together, with their arguments",
      [c.name for c in calls] == ["get_weather", "get_time"] and calls[0].arguments == {"city": "Berlin"}
      and calls[0].id != calls[1].id, [(c.name, c.arguments, c.id) for c in calls])
check("function: no result step (the client runs it)", not any(s.type == "function_result" for s in asked.steps))
results = [{"type": "function_result", "call_id": c.id, "name": c.name, "result": f"{c.name}: sunny"} for c in calls]
expect_error("function: a missing result is a 400 naming it",
             lambda: client.interactions.create(agent=AGENT, previous_interaction_id=asked.id, input=results[:1],
                                                tools=[weather, clock]), 400, calls[1].id)
expect_error("function: an unknown call_id is a 400 naming it",
             lambda: client.interactions.create(agent=AGENT, previous_interaction_id=asked.id,
                                                input=results + [{"type": "function_result", "call_id": "call_nope", "result": "x"}],
                                                tools=[weather, clock]), 400, "call_nope")
expect_error("function: answering an interaction that waits for nothing is a 400",
             lambda: client.interactions.create(agent=AGENT, previous_interaction_id=via.id, input=results,
                                                tools=[weather, clock]), 400, "requires_action")
expect_error("function: a function named like a sandbox tool is a 400",
             lambda: client.interactions.create(agent=AGENT, input="hi",
                                                tools=[{"type": "function", "name": "code_execution"}]), 400, "tools[0].name")
answered = client.interactions.create(agent=AGENT, previous_interaction_id=asked.id, input=results, tools=[weather, clock])
check("function: the results continue the loop to an answer", answered.status == "completed"
      and "get_weather: sunny" in answered.output_text and "get_time: sunny" in answered.output_text, answered.output_text)
check("function: in the same environment", answered.environment_id == asked.environment_id)
stream_events = [e.event_type for e in client.interactions.create(
    agent=AGENT, tools=[weather], stream=True, input='call `get_weather` with `{"city": "Oslo"}`')]
check("function: streaming shows the status change",
      "interaction.status_update" in stream_events and stream_events[-1] == "interaction.completed", stream_events)

# --- additional_context (hookbox extension): text the model sees with the tool's result ---------
context_hooks = json.dumps({"ctx": {
    "pre_tool_execution": [{"matcher": "code_execution", "hooks": [{"type": "command",
        "command": "cat >/dev/null; echo '{\"decision\": \"allow\", \"additional_context\": \"remember the style guide\"}'"}]}],
    "post_tool_execution": [{"matcher": "*", "hooks": [{"type": "command",
        "command": "cat >/dev/null; echo '{\"additional_context\": \"2 tests failed\"}'"}]}]}})
ctx = client.interactions.create(agent=AGENT, input="run `echo ran`", environment={"type": "remote", "sources": [
    {"type": "inline", "target": ".agents/hooks.json", "content": context_hooks}]})
check("additional_context: the model sees both hooks' context with the result",
      "ran" in ctx.output_text and "[context from hooks] remember the style guide" in ctx.output_text
      and "[context from hooks] 2 tests failed" in ctx.output_text, ctx.output_text)

# --- interaction hooks' trace (hookbox extension): the SDK still parses the interaction, the
# raw JSON carries `hooks` (a failing pre_interaction handler, failed open, and the context) ---
turn_hooks = json.dumps({"turn": {"pre_interaction": [{"matcher": "*", "hooks": [
    {"type": "command", "command": "cat >/dev/null; echo 'guard crashed: no policy file' >&2; exit 3"},
    {"type": "command", "command": "cat >/dev/null; echo '{\"decision\": \"allow\", \"additional_context\": \"deploys freeze on fridays\"}'"}]}]}})
traced = client.interactions.create(agent=AGENT, input="run `echo traced`", environment={"type": "remote", "sources": [
    {"type": "inline", "target": ".agents/hooks.json", "content": turn_hooks}]})
check("interaction hooks: create parses; a failing handler fails open", traced.status == "completed"
      and "traced" in traced.output_text, traced.status)
got_traced = client.interactions.get(traced.id)
check("interaction hooks: get parses", got_traced.id == traced.id and got_traced.output_text == traced.output_text)
request = urllib.request.Request(f"{BASE}/v1beta/interactions/{traced.id}", headers={"x-goog-api-key": KEY})
with urllib.request.urlopen(request) as answer:
    raw = json.load(answer)
pre = raw.get("hooks", {}).get("pre", {})
handlers = pre.get("trace", [])
check("interaction hooks: the raw JSON has the trace, the failure's stderr and the context",
      [h.get("outcome") for h in handlers] == ["failed_open", "allow"]
      and "guard crashed: no policy file" in handlers[0].get("stderr", "")
      and pre.get("additional_context") == ["deploys freeze on fridays"], raw.get("hooks"))

print(f"{passes} passed, {len(failures)} failed" + (": " + ", ".join(failures) if failures else ""))
sys.exit(1 if failures else 0)
