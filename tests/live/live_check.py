"""Live interactions (`client.aio.interactions.connect`, google-genai 3.5+) through the
unmodified SDK against a real `hookbox serve`, with a real hooks file run in the environment's
sandbox: a command hook denies `rm` (with a reason) and asks about `deploy`.

1. a live interaction is created on the socket (`interaction.create`, continuing a REST one and
   its environment), and is `idle` between turns;
2. an input whose tool call a hook denies: the steps arrive as frames, the deny reason reaches
   the model, and every step is stored (GET afterwards, same steps, same event ids);
3. an input a hook asks about: the turn ends `requires_action` on the socket, the answer goes
   over REST while the socket waits, and the socket streams the rest (the call ran);
4. a socket killed (kill -9 of its client) mid-turn: the turn goes on, nothing is lost, and a
   reconnect to the same id continues the interaction;
5. a cancel of a running turn: the interaction ends `cancelled`;
6. bad frames (not JSON, an unknown event type, a bad input, world_setup, an oversized frame, a
   flood past the frames-per-second bound) get `error` events naming the problem and the
   server stays up;
7. `interaction.complete` ends it `completed` with `interaction.completed {status: {code: 0}}`.

argv: HOOKBOX_BIN DATA_DIR. Ends with `N passed, M failed`.
"""

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings

import websockets
from google import genai

warnings.simplefilter("ignore")
hookbox, data = sys.argv[1], sys.argv[2]
AGENT = "antigravity-preview-09-2026"
APPROVAL = "hookbox_approval"
results = []

HOOKS = json.dumps({
    "review": {"pre_tool_execution": [{"matcher": "code_execution", "hooks": [
        {"type": "command", "command": "python3 /.agents/review.py", "timeout": 30}]}]}
})
REVIEW = r'''
import json, sys
code = json.load(sys.stdin)["tool_call"]["args"].get("code", "")
if "rm " in code:
    print(json.dumps({"decision": "deny", "reason": "no deleting on the live box"}))
elif "deploy" in code:
    print(json.dumps({"decision": "ask", "reason": "deploys need a person"}))
else:
    print(json.dumps({"decision": "allow"}))
'''
ENV = {"type": "remote", "sources": [
    {"type": "inline", "target": ".agents/hooks.json", "content": HOOKS},
    {"type": "inline", "target": ".agents/review.py", "content": REVIEW},
]}


def check(name, ok, detail=""):
    results.append((name, bool(ok)))
    print(("ok  " if ok else "FAIL") + " " + name + ("" if ok else f": {detail}"), flush=True)


def serve():
    proc = subprocess.Popen(
        [hookbox, "serve", "--listen", "127.0.0.1:0", "--data-dir", data],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={k: v for k, v in os.environ.items() if k != "GEMINI_API_KEY"},
    )
    url = None
    for line in proc.stdout:
        if line.startswith("hookbox is listening on http://"):
            url = line.split()[4]
        if line.startswith("or set "):
            break
    return proc, url


proc, base = serve()
client = genai.Client(api_key="local", http_options={"base_url": base, "api_version": "v1beta"})


def http(method, path, body=None):
    req = urllib.request.Request(base + "/v1beta" + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def stored(iid):
    return http("GET", f"/interactions/{iid}")[1]


def until(pred, timeout=120):
    """Waits for a condition of the server (bounded only against a hung test)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.1)
    return None


async def turn_events(conn):
    """Events until the turn's `interaction.status_update` (included)."""
    events = []
    async for ev in conn.receive():
        events.append(ev)
        if ev.event_type == "interaction.status_update":
            break
    return events


def text_of(events):
    return "".join(ev.delta.text for ev in events
                   if ev.event_type == "step.delta" and getattr(ev.delta, "type", "") == "text")


def started(events):
    return [ev.step for ev in events if ev.event_type == "step.start"]


def errors(events):
    return [ev for ev in events if ev.event_type == "error"]


async def main():
    first = client.interactions.create(agent=AGENT, environment=ENV, input="hello")
    env = first.environment_id

    # 1. Create on the socket.
    async with client.aio.interactions.connect("new") as conn:
        await conn.send({"event_type": "interaction.create", "previous_interaction_id": first.id})
        head = []
        async for ev in conn.receive():
            head.append(ev)
            if ev.event_type == "interaction.created":
                break
        check("create: interaction.connected, then interaction.created (typed by the SDK)",
              [type(e).__name__ for e in head] == ["InteractionConnectedEvent", "LiveInteractionCreatedEvent"],
              head)
        live = head[-1].interaction_id
        check("create: the live interaction is idle, in the REST one's environment",
              stored(live)["status"] == "idle" and stored(live)["environment_id"] == env, stored(live))

        # 2. A tool call a hook denies.
        await conn.send("Run `rm -rf /workspace/keep` now.")
        denied = await turn_events(conn)
        check("deny: steps arrive as frames (call, result, answer)",
              [s.type for s in started(denied)] == ["user_input", "code_execution_call", "code_execution_result", "model_output"],
              [s.type for s in started(denied)])
        check("deny: the hook's reason reaches the model",
              "no deleting on the live box" in text_of(denied), text_of(denied))
        check("deny: the turn leaves the interaction idle",
              getattr(denied[-1], "status", None) == "idle" and stored(live)["status"] == "idle", denied[-1])
        got = stored(live)
        check("deny: every streamed step is stored",
              [s["type"] for s in got["steps"]] == [s.type for s in started(denied)], got["steps"])
        _, sse = 0, None
        with urllib.request.urlopen(base + f"/v1beta/interactions/{live}?stream=true", timeout=60) as r:
            sse = [json.loads(line[5:]) for line in r.read().decode().splitlines()
                   if line.startswith("data:") and line[5:].strip() != "[DONE]"]
        frame_ids = [ev.event_id for ev in denied if ev.event_type.startswith("step.")]
        sse_ids = [e.get("event_id") for e in sse if e["event_type"].startswith("step.")]
        check("deny: frames carry the SSE event ids", frame_ids == sse_ids, (frame_ids, sse_ids))

        # 3. An ask, answered over REST while the socket waits.
        await conn.send("Run `echo shipped > /workspace/deploy.txt` to deploy.")
        asked = await turn_events(conn)
        request = next((s for s in started(asked) if s.type == "function_call" and s.name == APPROVAL), None)
        check("ask: the turn ends requires_action with a hookbox_approval call on the socket",
              request is not None and getattr(asked[-1], "status", None) == "requires_action", asked)
        loop = asyncio.get_running_loop()
        answer = loop.run_in_executor(None, lambda: client.interactions.create(
            agent=AGENT, previous_interaction_id=live,
            input=[{"type": "function_result", "call_id": request.id, "result": {"approved": True}}]))
        resumed = await turn_events(conn)
        answered = await answer
        check("ask: the REST answer goes on in place (same interaction)", answered.id == live, answered.id)
        check("ask: the socket streams the approved call and its result",
              "code_execution_result" in [s.type for s in started(resumed)]
              and getattr(resumed[-1], "status", None) == "idle", [s.type for s in started(resumed)])
        check("ask: the call ran in the environment",
              client.environments.files.download(environment=env, path="/workspace/deploy.txt") == b"shipped\n")

    # 4. A socket killed mid-turn.
    killer = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, base, live],
                              stdout=subprocess.PIPE, text=True)
    line = killer.stdout.readline()
    check("kill: the client saw the turn's call start", line.strip() == "call started", line)
    killer.kill()
    killer.wait()
    async with client.aio.interactions.connect(live) as conn:
        events = []
        async for ev in conn.receive():
            events.append(ev)
            if ev.event_type == "interaction.connected" and getattr(ev, "status", None) == "idle":
                break
            if ev.event_type == "interaction.status_update":
                break
        check("kill: reconnecting to the same id: interaction.connected first",
              events[0].event_type == "interaction.connected", events)
        check("kill: the turn went on without its socket",
              client.environments.files.download(environment=env, path="/workspace/late.txt") == b"late\n")
        await conn.send("Read `/workspace/late.txt` back.")
        more = await turn_events(conn)
        check("kill: the reconnected socket continues the interaction", "late" in text_of(more), text_of(more))
    steps = [s["type"] for s in stored(live)["steps"]]
    check("kill: nothing lost: the killed turn's steps are stored",
          steps.count("user_input") == 4 and steps.count("code_execution_result") >= 3, steps)

    # 6. Bad frames, through the SDK and raw.
    async with client.aio.interactions.connect(live) as conn:
        await conn.send({"event_type": "bogus"})
        await conn.send({"event_type": "world_setup", "world_prompt": "A coral reef"})
        await conn.send({"event_type": "input", "content": {}})
        bad = []
        async for ev in conn.receive():
            if ev.event_type == "error":
                bad.append(ev)
            if len(bad) == 3:
                break
        check("bad: an unknown event type is an error naming it",
              bad[0].error.code == "invalid_argument" and "bogus" in bad[0].error.message, bad[0])
        check("bad: world_setup is an error saying hookbox does not serve interactive worlds",
              bad[1].error.code == "unimplemented" and "interactive worlds" in bad[1].error.message, bad[1])
        check("bad: a malformed input is an error naming the field",
              "input.content" in bad[2].error.message, bad[2])
    url = base.replace("http://", "ws://") + "/v1beta/interactions/live"
    async with websockets.connect(url, max_size=None) as ws:
        await ws.send("{not json")
        not_json = json.loads(await ws.recv())
        check("bad: a frame that is not JSON is an error event",
              not_json["event_type"] == "error" and "not valid JSON" in not_json["error"]["message"], not_json)
        await ws.send(json.dumps({"event_type": "interaction.connect", "id": live}))
        json.loads(await ws.recv())
        await ws.send(json.dumps({"event_type": "input", "content": [{"type": "text", "text": "x" * (2 << 20)}]}))
        big = json.loads(await ws.recv())
        check("bad: an oversized frame is an error event naming the bound",
              big["error"]["code"] == "resource_exhausted" and "bytes" in big["error"]["message"], big)
        for _ in range(300):
            await ws.send(json.dumps({"event_type": "bogus"}))
        flood = None
        for _ in range(300):
            ev = json.loads(await ws.recv())
            if ev["error"]["code"] == "resource_exhausted":
                flood = ev
                break
        check("bad: a flood past the frames-per-second bound is an error event",
              flood is not None and "per second" in flood["error"]["message"], flood)
    check("bad: the server is alive", http("GET", "/interactions/" + live)[0] == 200)

    # 7. Complete.
    async with client.aio.interactions.connect(live) as conn:
        await conn.complete()
        end = [ev async for ev in conn.receive()]
        check("complete: interaction.completed with a google.rpc.Status code 0",
              type(end[-1]).__name__ == "LiveInteractionCompletedEvent" and end[-1].status.code == 0, end)
    check("complete: the interaction is completed", stored(live)["status"] == "completed", stored(live)["status"])

    # 5. Cancel a running turn (a new live interaction in the same environment).
    async with client.aio.interactions.connect("new") as conn:
        await conn.send({"event_type": "interaction.create", "previous_interaction_id": live})
        other = None
        async for ev in conn.receive():
            if ev.event_type == "interaction.created":
                other = ev.interaction_id
                break
        await conn.send("Run `sleep 300`.")
        async for ev in conn.receive():
            if ev.event_type == "step.start" and ev.step.type == "code_execution_call":
                break
        await conn.cancel()
    status = until(lambda: stored(other)["status"] if stored(other)["status"] != "in_progress" else None)
    check("cancel: the running turn is cancelled and the interaction ends cancelled",
          status == "cancelled", status)


KILLED_CLIENT = r'''
import asyncio, sys, warnings
from google import genai
warnings.simplefilter("ignore")
base, live = sys.argv[1], sys.argv[2]
client = genai.Client(api_key="local", http_options={"base_url": base, "api_version": "v1beta"})
async def main():
    async with client.aio.interactions.connect(live) as conn:
        await conn.send("Run `sleep 3; echo late > /workspace/late.txt` please.")
        async for ev in conn.receive():
            if ev.event_type == "step.start" and ev.step.type == "code_execution_call":
                print("call started", flush=True)
                await asyncio.sleep(3600)  # killed here, mid-turn
asyncio.run(main())
'''

try:
    asyncio.run(main())
except Exception as e:  # a crash of the check itself is a failure, not a pass
    check("the live checks ran to the end", False, repr(e))
finally:
    proc.terminate()
    proc.wait()

passed = sum(1 for _, ok in results if ok)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if passed == len(results) and results else 1)
