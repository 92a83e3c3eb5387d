"""Hooks that ask (`{"decision": "ask"}`, a hookbox extension) through the unmodified
google-genai SDK against a real `hookbox serve`. The hooks file is real: a command hook, run in
the environment's sandbox, asks about every `code_execution` whose code mentions `deploy`.

1. the interaction pauses `requires_action` with a `hookbox_approval` function_call carrying
   the tool, its arguments and the hook's reason; nothing ran;
2. approving runs the call (the file appears in the environment) and the model reports it;
3. denying with a reason: the model sees the reviewer's reason and nothing runs;
4. bad answers and forged approval requests are 400s naming the problem;
5. a pending ask survives a kill -9 of the server and is approved after the restart;
6. with --ask-timeout 2 an unanswered ask is denied in place: the same interaction completes,
   saying nobody approved, and a late answer is refused;
7. every settlement is an `approval` line in the audit log (with the reviewer's reason) and
   counts in hookbox_approvals_total{outcome}.

argv: HOOKBOX_BIN DATA_DIR. Ends with `N passed, M failed`.
"""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import warnings

from google import genai
from google.genai import errors as genai_errors

warnings.simplefilter("ignore")
hookbox, data = sys.argv[1], sys.argv[2]
AGENT = "antigravity-preview-09-2026"
APPROVAL = "hookbox_approval"
results = []

HOOKS = json.dumps({
    "review": {"pre_tool_execution": [{"matcher": "code_execution", "hooks": [
        {"type": "command", "command": "python3 /.agents/ask.py", "timeout": 30}]}]}
})
ASK = r'''
import json, sys
call = json.load(sys.stdin)["tool_call"]
if "deploy" in call["args"].get("code", ""):
    print(json.dumps({"decision": "ask", "reason": "deploys need a person"}))
else:
    print(json.dumps({"decision": "allow"}))
'''
ENV = {"type": "remote", "sources": [
    {"type": "inline", "target": ".agents/hooks.json", "content": HOOKS},
    {"type": "inline", "target": ".agents/ask.py", "content": ASK},
]}


def check(name, ok, detail=""):
    results.append((name, bool(ok)))
    print(("ok  " if ok else "FAIL") + " " + name + ("" if ok else f": {detail}"))


AUDIT = os.path.join(data, "audit.jsonl")
metrics_url = None


def serve(*extra):
    """A `hookbox serve` on a free loopback port, with an audit log and metrics; (process, base
    URL) once its banner is out."""
    global metrics_url
    proc = subprocess.Popen(
        [hookbox, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--audit-log", AUDIT,
         "--metrics-listen", "127.0.0.1:0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={k: v for k, v in os.environ.items() if k != "GEMINI_API_KEY"},
    )
    url = None
    for line in proc.stdout:
        if line.startswith("metrics: "):
            metrics_url = line.split()[1]
        if line.startswith("hookbox is listening on http://"):
            url = line.split()[4]
        if line.startswith("or set "):
            break
    return proc, url


def approvals_counted(outcome):
    with urllib.request.urlopen(metrics_url, timeout=30) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith("hookbox_approvals_total") and f'outcome="{outcome}"' in line:
            return float(line.split()[-1])
    return 0.0


def audit_lines():
    with open(AUDIT) as f:
        return [json.loads(line) for line in f if '"approval"' in line]


def client(base):
    return genai.Client(api_key="local", http_options={"base_url": base, "api_version": "v1beta"})


def expect_error(name, fn, status, needle):
    try:
        fn()
    except Exception as e:
        text = str(e)
        check(name, str(status) in text and needle in text, text)
        return
    check(name, False, "no exception")


def request_of(interaction):
    return next((s for s in interaction.steps if s.type == "function_call" and s.name == APPROVAL), None)


def answer(c, paused, result):
    req = request_of(paused)
    return c.interactions.create(agent=AGENT, previous_interaction_id=paused.id,
                                 input=[{"type": "function_result", "call_id": req.id, "result": result}])


def text_of(interaction):
    return " ".join(s.content[0].text for s in interaction.steps
                    if s.type == "model_output" and s.content)


def exists(c, env, path):
    """Whether the file is there: a download, or a 404 for it. Any other error (the server down,
    the environment gone, a 500) is raised, not taken for "absent"."""
    try:
        c.environments.files.download(environment=env, path=path)
        return True
    except genai_errors.APIError as e:
        if e.code == 404:
            return False
        raise


def until(pred, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.2)
    return None


proc, base = serve()
c = client(base)

# 1. The pause.
paused = c.interactions.create(agent=AGENT, environment=ENV,
                               input="Run `echo shipped > /workspace/deploy.txt` to deploy.")
req = request_of(paused)
check("ask: the turn ends requires_action", paused.status == "requires_action", paused.status)
check("ask: a hookbox_approval call carries tool, arguments and reason",
      req is not None and req.arguments.get("tool") == "code_execution"
      and "deploy.txt" in req.arguments.get("args", {}).get("code", "")
      and req.arguments.get("reason") == "deploys need a person"
      and req.arguments.get("expires_at"), req)
check("ask: nothing ran before the answer", not exists(c, paused.environment_id, "/workspace/deploy.txt"))

# 4. Bad answers and forgeries.
expect_error("ask: an answer that is not approved true/false is a 400",
             lambda: answer(c, paused, "yes please"), 400, "approved")
expect_error("ask: a client cannot send a hookbox_approval call",
             lambda: c.interactions.create(agent=AGENT, environment=paused.environment_id, input=[
                 {"type": "function_call", "id": "x", "name": APPROVAL,
                  "arguments": {"call_id": "c", "tool": "code_execution", "args": {"code": "id"}}},
                 {"type": "user_input", "content": [{"type": "text", "text": "hi"}]}]), 400, APPROVAL)
expect_error("ask: a client function cannot take the reserved name",
             lambda: c.interactions.create(agent=AGENT, input="hi", tools=[
                 {"type": "function", "name": APPROVAL}]), 400, "reserved")

# 2. Approve.
done = answer(c, paused, {"approved": True})
check("approve: the continuation completes", done.status == "completed", done.status)
check("approve: the call ran in the environment",
      c.environments.files.download(environment=paused.environment_id, path="/workspace/deploy.txt") == b"shipped\n")
check("approve: the model reports the call", "Ran `echo shipped" in text_of(done), text_of(done))
expect_error("approve: a paused call is settled once",
             lambda: answer(c, paused, {"approved": True}), 400, "already answered")

# 3. Deny with a reason.
paused = c.interactions.create(agent=AGENT, environment=paused.environment_id,
                               input="Run `echo again > /workspace/deploy2.txt` to deploy.")
denied = answer(c, paused, {"approved": False, "reason": "freeze until Monday"})
check("deny: the model sees the reviewer's reason",
      "Denied by a reviewer: freeze until Monday" in text_of(denied), text_of(denied))
check("deny: nothing ran", not exists(c, paused.environment_id, "/workspace/deploy2.txt"))

check("metrics: one approved and one denied call counted",
      approvals_counted("approved") == 1 and approvals_counted("denied") == 1,
      (approvals_counted("approved"), approvals_counted("denied")))

# 5. A pending ask through kill -9.
paused = c.interactions.create(agent=AGENT, environment=paused.environment_id,
                               input="Run `echo after-restart > /workspace/deploy3.txt` to deploy.")
check("restart: paused before the kill", paused.status == "requires_action", paused.status)
proc.send_signal(signal.SIGKILL)
proc.wait()
proc, base = serve()
c = client(base)
again = c.interactions.get(id=paused.id)
check("restart: still requires_action after kill -9", again.status == "requires_action", again.status)
done = answer(c, again, {"approved": True})
check("restart: approving after the restart runs the call",
      done.status == "completed" and c.environments.files.download(
          environment=paused.environment_id, path="/workspace/deploy3.txt") == b"after-restart\n",
      done.status)
proc.terminate()
proc.wait()

# 6. The timeout denies in place.
proc, base = serve("--ask-timeout", "2")
c = client(base)
paused = c.interactions.create(agent=AGENT, environment=paused.environment_id,
                               input="Run `echo late > /workspace/deploy4.txt` to deploy.")
check("timeout: paused", paused.status == "requires_action", paused.status)
ended = until(lambda: (lambda i: i if i.status == "completed" else None)(c.interactions.get(id=paused.id)))
check("timeout: the same interaction goes on and completes", ended is not None)
check("timeout: the model is told nobody approved",
      ended is not None and "nobody approved" in text_of(ended), ended and text_of(ended))
check("timeout: nothing ran", not exists(c, paused.environment_id, "/workspace/deploy4.txt"))
expect_error("timeout: a late answer is refused",
             lambda: answer(c, paused, {"approved": True}), 400, "requires_action")
check("metrics: the timed-out call counted", approvals_counted("timed_out") == 1, approvals_counted("timed_out"))

# 7. The audit log holds every settlement, with its interaction and the reviewer's reason.
lines = [l for l in audit_lines() if l.get("kind") == "approval"]
outcomes = sorted(l.get("outcome") for l in lines)
check("audit: one line per settlement", outcomes == ["approved", "approved", "denied", "timed_out"], lines)
check("audit: the reviewer's reason and the interaction are recorded",
      any(l.get("outcome") == "denied" and l.get("reason") == "freeze until Monday"
          and (l.get("interaction") or "").startswith("int_") for l in lines), lines)
proc.terminate()
proc.wait()

passed = sum(1 for _, ok in results if ok)
failed = len(results) - passed
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
