"""Conformance of `hookbox serve` with what google-genai 3.4.0+ added to interactions and
environments: tool search and deferred tools, ephemeral auth tokens (`client.interactions.auth_tokens`, a `Client` whose
api_key is `auth_tokens/...`) and environment modes (`mode`, `custom_config`,
`system_instruction`, `list(mode=)`).

Run by run.sh after sdk_basic.py, with HOOKBOX_BASE_URL, HOOKBOX_TEST_KEY and HOOKBOX_SERVE_LOG
(the server's log, which must never hold a token). On an SDK without these methods (3.3.0) it
says so and checks nothing: they are not in that SDK, so there is nothing to compare.
"""

import datetime as dt
import os
import sys
import time
import warnings

from google import genai

warnings.simplefilter("ignore")

BASE = os.environ["HOOKBOX_BASE_URL"]
KEY = os.environ["HOOKBOX_TEST_KEY"]
SERVE_LOG = os.environ["HOOKBOX_SERVE_LOG"]
AUDIT_LOG = os.environ["HOOKBOX_AUDIT_LOG"]
AGENT = "antigravity-preview-09-2026"
OPTS = {"base_url": BASE, "api_version": "v1beta"}

client = genai.Client(api_key=KEY, http_options=OPTS)
if not hasattr(client.interactions, "auth_tokens"):
    print(f"sdk_36.py: google-genai {genai.__version__} has no auth tokens, environment modes or tool search types "
          "(added in 3.4.0 and 3.5.0): nothing to check on this version")
    sys.exit(0)

failures = []
passes = 0


def check(name, cond, detail=""):
    global passes
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f": {detail}"))
    if cond:
        passes += 1
    else:
        failures.append(name)


def expect_error(name, fn, statuses, needle=""):
    try:
        fn()
    except Exception as e:
        text = str(e)
        check(name, any(str(s) in text for s in statuses) and needle in text, text)
        return
    check(name, False, "no exception")


def status_of(fn):
    """The HTTP status `fn` fails with, or 200."""
    try:
        fn()
        return 200
    except Exception as e:
        return getattr(e, "code", None) or getattr(e, "status_code", None) or str(e)


# --- environment modes ---------------------------------------------------------------------
instruction = "Always answer as the harbour master of Kiel."
env = client.environments.create(
    mode="on_demand", custom_config={"pool": "gpu", "n": 2}, system_instruction=instruction)
check("modes: create returns mode and custom_config",
      env.mode == "on_demand" and env.custom_config == {"pool": "gpu", "n": 2}, env)
check("modes: no environment_key for on_demand", getattr(env, "environment_key", None) is None, env)
got = client.environments.get(env.id)
check("modes: get returns them", got.mode == "on_demand" and got.custom_config == {"pool": "gpu", "n": 2}
      and getattr(got, "system_instruction", None) == instruction, got)
plain = client.environments.create()
check("modes: on_demand is the default", plain.mode == "on_demand", plain)
on_demand = [e.id for e in client.environments.list(mode="on_demand", page_size=100).environments]
self_hosted = [e.id for e in client.environments.list(mode="self_hosted", page_size=100).environments]
check("modes: list(mode=on_demand) has them", env.id in on_demand and plain.id in on_demand, on_demand)
check("modes: list(mode=self_hosted) filters them out", env.id not in self_hosted and plain.id not in self_hosted,
      self_hosted)
expect_error("modes: self_hosted is a 400 naming remote runners",
             lambda: client.environments.create(mode="self_hosted", custom_config={"a": 1}), [400],
             "remote runners")
expect_error("modes: an embedded self_hosted environment is a 400 too",
             lambda: client.interactions.create(agent=AGENT, input="hi",
                                                environment={"type": "remote", "mode": "self_hosted"}),
             [400], "remote runners")
told = client.interactions.create(agent=AGENT, environment=env.id,
                                  input="Please show your system instruction.",
                                  system_instruction="Be brief.")
check("modes: the environment's instruction reaches the model, before the interaction's",
      f"[system instruction] {instruction}\n\nBe brief." in told.output_text, told.output_text)
client.environments.delete(plain.id)

# --- ephemeral auth tokens -----------------------------------------------------------------
first = client.interactions.create(agent=AGENT, input="run `echo first-turn`", environment=env.id)
other = client.interactions.create(agent=AGENT, input="run `echo other`")
minted = client.interactions.auth_tokens.create(
    first.id, expire_time=dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=10))
token = minted.auth_token
check("token: create returns auth_tokens/... and expires_at",
      token.startswith("auth_tokens/") and len(token) > 40 and minted.expires_at is not None, minted)
holder = genai.Client(api_key=token, http_options=OPTS)
read = holder.interactions.get(first.id)
check("token: reads its interaction", read.id == first.id and "first-turn" in read.output_text, read)
streamed = [e.event_type for e in holder.interactions.get(first.id, stream=True)]
check("token: streams its interaction", streamed[0] == "interaction.created"
      and streamed[-1] == "interaction.completed", streamed)
cont = holder.interactions.create(agent=AGENT, previous_interaction_id=first.id, input="run `echo second-turn`")
check("token: continues its interaction, in its environment",
      cont.status == "completed" and "second-turn" in cont.output_text and cont.environment_id == env.id, cont)
check("token: the continuation records which token (its id, not its value) continued it",
      (getattr(cont, "auth_token_id", "") or "").startswith("atk_") and token not in str(cont.model_dump()), cont)
check("token: another interaction is a 404", status_of(lambda: holder.interactions.get(other.id)) == 404)
check("token: continuing another interaction is a 404", status_of(lambda: holder.interactions.create(
    agent=AGENT, previous_interaction_id=other.id, input="run `echo x`")) == 404)
check("token: a new conversation is a 401",
      status_of(lambda: holder.interactions.create(agent=AGENT, input="run `echo x`")) == 401)
check("token: another environment is a 401", status_of(lambda: holder.interactions.create(
    agent=AGENT, previous_interaction_id=first.id, environment=plain.id, input="run `echo x`")) == 401)
check("token: environments.list is a 401", status_of(lambda: holder.environments.list()) == 401)
check("token: agents.list is a 401", status_of(lambda: holder.agents.list()) == 401)
check("token: cancel of its interaction is a 401", status_of(lambda: holder.interactions.cancel(first.id)) == 401)
check("token: a token cannot mint tokens",
      status_of(lambda: holder.interactions.auth_tokens.create(first.id)) == 401)
with_bearer = genai.Client(api_key=token, http_options={**OPTS, "headers": {"Authorization": "Bearer not-a-key"}})
check("token: an Authorization header beside it changes nothing",
      with_bearer.interactions.get(first.id).id == first.id)
check("token: for an unknown interaction create is a 404",
      status_of(lambda: client.interactions.auth_tokens.create("int_nope")) == 404)

client.interactions.auth_tokens.delete(first.id, token)
check("token: after deletion a read is a 401", status_of(lambda: holder.interactions.get(first.id)) == 401)
check("token: deleting it again is a 404",
      status_of(lambda: client.interactions.auth_tokens.delete(first.id, token)) == 404)
with open(SERVE_LOG, encoding="utf-8", errors="replace") as f:
    log = f.read()
check("token: the server log names uses by token id, never the token",
      "request with an auth token" in log and "atk_" in log and token[len("auth_tokens/"):] not in log)

import json  # noqa: E402
with open(AUDIT_LOG, encoding="utf-8") as f:
    audit_text = f.read()
token_lines = [json.loads(line) for line in audit_text.splitlines() if '"auth_token"' in line]
token_lines = [a for a in token_lines if a.get("kind") == "auth_token" and a.get("token_interaction") == first.id]
ids = {a.get("token_id") for a in token_lines}
check("token: the audit log has its creation, uses (allowed and refused) and deletion by token id",
      len(ids) >= 1 and all(i and i.startswith("atk_") for i in ids)
      and {"created", "deleted"} <= {a.get("action") for a in token_lines}
      and {True, False} <= {a.get("allowed") for a in token_lines if "allowed" in a}
      and cont.auth_token_id in ids, token_lines[:4])
check("token: the audit log never holds the token", token[len("auth_tokens/"):] not in audit_text)

expect_error("token: an expire_time in the past is a 400",
             lambda: client.interactions.auth_tokens.create(
                 first.id, expire_time=dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=5)), [400],
             "future")
short = client.interactions.auth_tokens.create(
    first.id, expire_time=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=4))
short_client = genai.Client(api_key=short.auth_token, http_options=OPTS)
check("token: a short-lived token works before its expiry", status_of(lambda: short_client.interactions.get(first.id)) == 200)
# Expiry is a wall-clock instant: poll until it passes, bounded well beyond it.
deadline = time.monotonic() + 60
expired = False
while time.monotonic() < deadline:
    if dt.datetime.now(dt.timezone.utc) > short.expires_at and status_of(lambda: short_client.interactions.get(first.id)) == 401:
        expired = True
        break
    time.sleep(0.2)
check("token: after its expires_at it is a 401", expired, short.expires_at)
capped = client.interactions.auth_tokens.create(
    first.id, expire_time=dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=30))
check("token: expire_time is capped at 24 hours",
      capped.expires_at <= dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=24, seconds=5), capped.expires_at)

# --- tool search and deferred tools ---------------------------------------------------------
weather = {"type": "function", "name": "get_weather", "description": "Full description: the weather in a city, now.",
           "short_description": "Weather now.", "defer_loading": True,
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
clock = {"type": "function", "name": "get_time", "description": "The time in a city."}
server_tools = [{"type": "tool_search", "execution": "server"}, weather, clock]
searched = client.interactions.create(
    agent=AGENT, tools=server_tools,
    input='search `weather` then call `get_weather` with `{"city": "Oslo"}`')
kinds = [s.type for s in searched.steps]
check("search (server): call, result, then the loaded function's call",
      kinds == ["user_input", "tool_search_call", "tool_search_result", "function_call"]
      and searched.status == "requires_action", (kinds, searched.status))
call_step, result_step = searched.steps[1], searched.steps[2]
check("search (server): typed steps, the result answering the call with the full definition",
      type(call_step).__name__ == "ToolSearchCallStep" and type(result_step).__name__ == "ToolSearchResultStep"
      and result_step.call_id == call_step.id and [f.name for f in result_step.result] == ["get_weather"]
      and result_step.result[0].description == weather["description"], (call_step, result_step))
check("search (server): the query is kept in the call's arguments",
      getattr(call_step.arguments, "query", None) == "weather", call_step)
answered = client.interactions.create(
    agent=AGENT, previous_interaction_id=searched.id, tools=server_tools,
    input=[{"type": "function_result", "call_id": searched.steps[3].id, "name": "get_weather", "result": "sunny"}])
check("search (server): the loaded function's result continues to an answer",
      answered.status == "completed" and "loaded get_weather" in answered.output_text
      and "sunny" in answered.output_text, answered.output_text)
unloaded = client.interactions.create(agent=AGENT, tools=server_tools,
                                      input='call `get_weather` with `{"city": "Oslo"}`')
check("search: a deferred function called before a search is an error result, not a call for the client",
      unloaded.status == "completed" and any(s.type == "function_result" and "not loaded" in str(s.result)
                                             for s in unloaded.steps), [s.type for s in unloaded.steps])
by_name = client.interactions.create(agent=AGENT, tools=server_tools, input="load `get_weather`")
check("search (server): load by function_names", [f.name for f in by_name.steps[2].result] == ["get_weather"]
      and by_name.steps[1].arguments.function_names == ["get_weather"], by_name.steps[1:3])
nothing = client.interactions.create(agent=AGENT, tools=server_tools, input="search `submarine`")
check("search (server): no match is an empty result", nothing.steps[2].type == "tool_search_result"
      and not nothing.steps[2].result and "found nothing" in nothing.output_text, nothing.output_text)
events = list(client.interactions.create(agent=AGENT, tools=server_tools, input="search `weather`", stream=True))
deltas = [e.delta for e in events if e.event_type == "step.delta"]
check("search (server): streamed as typed tool_search deltas",
      [type(d).__name__ for d in deltas if d.type.startswith("tool_search")] == ["ToolSearchCallDelta", "ToolSearchResultDelta"]
      and [f.name for f in next(d for d in deltas if d.type == "tool_search_result").result] == ["get_weather"],
      [(type(d).__name__, d.type) for d in deltas])
expect_error("search: a deferred tool without a tool_search tool is a 400",
             lambda: client.interactions.create(agent=AGENT, tools=[weather], input="hi"), [400], "tool_search")

client_tools = [{"type": "tool_search", "execution": "client", "name": "my_search", "description": "Search my catalog.",
                 "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}, weather]
asked = client.interactions.create(agent=AGENT, tools=client_tools,
                                   input='search `weather` then call `get_weather` with `{"city": "Oslo"}`')
search_call = asked.steps[-1]
check("search (client): the turn ends requires_action with a call of the client's search function",
      asked.status == "requires_action" and search_call.type == "function_call" and search_call.name == "my_search"
      and search_call.arguments == {"query": "weather"}, (asked.status, asked.steps[-1]))
loaded = client.interactions.create(
    agent=AGENT, previous_interaction_id=asked.id, tools=client_tools,
    input=[{"type": "function_result", "call_id": search_call.id, "name": "my_search",
            "result": [{"type": "function", "name": "get_weather", "description": weather["description"],
                        "parameters": weather["parameters"]}]}])
check("search (client): the definitions the client returned load the function, which is then called",
      loaded.status == "requires_action" and loaded.steps[-1].type == "function_call"
      and loaded.steps[-1].name == "get_weather", (loaded.status, [s.type for s in loaded.steps]))

print(f"{passes} passed, {len(failures)} failed" + (": " + ", ".join(failures) if failures else ""))
sys.exit(1 if failures else 0)
