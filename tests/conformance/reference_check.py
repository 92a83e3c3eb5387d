"""Runs the reference documentation's three Python examples (tests/conformance/reference/, verbatim
except for the client construction) against `hookbox serve` with the offline agent, the real
sandbox and hooks, and asserts exactly what the reference promises
(shared/reference/000_4a40fa512f86aa3a.txt):

1. security gate: the deny reason reaches output_text, and /tmp/forbidden still exists after the
   denied `rm -rf` (created first in that environment through the files upload API);
2. privacy gate: the PII read is denied with the policy's reason, and the continuation
   (previous_interaction_id) runs in the same environment and its answer carries the content of
   /workspace/public/summary.json;
3. audit telemetry: the post hook's POSTs reached telemetry.example.com (a local HTTPS receiver,
   TELEMETRY_EVENTS) for write_to_file and view_file, with the header the allowlist's transform
   injects.

Each example runs in this process (runpy) so its variables (interaction, int_1, int_2) can be
checked. Prints one line per check and `N passed, M failed`; exits non-zero on any failure.
"""

import contextlib
import io
import json
import os
import runpy
import sys
import traceback
import warnings

from google import genai

warnings.simplefilter("ignore")

HERE = os.path.dirname(os.path.abspath(__file__))
AGENT = "antigravity-preview-09-2026"
RM_REASON = "Destructive command blocked by security gate."
PII_REASON = (
    "Access to confidential `/private/` records is blocked by PII compliance policy. "
    "Query approved `/public/` summary tables instead."
)
SUMMARY = '{"department": "Engineering", "team_size": 42, "status": "active"}'
TOKEN_HEADER = "Bearer telemetry_secret_token_123"

client = genai.Client(
    api_key=os.environ["HOOKBOX_TEST_KEY"],
    http_options={"base_url": os.environ["HOOKBOX_BASE_URL"], "api_version": "v1beta"},
)
passed, failed = 0, []


def check(name, cond, detail=""):
    global passed
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f": {detail}"), flush=True)
    if cond:
        passed += 1
    else:
        failed.append(name)


def example(script):
    """Runs one reference example; returns its globals (None if it raised) and its stdout."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            env = runpy.run_path(os.path.join(HERE, "reference", script), run_name="__main__")
    except Exception:
        check(f"{script} runs", False, traceback.format_exc())
        return None, out.getvalue()
    check(f"{script} runs", True)
    return env, out.getvalue()


def paths(env_id, path):
    try:
        return [f.path for f in client.environments.files.list(env_id, path, recursive=True).files]
    except Exception as e:  # a 404 means the path is gone
        return f"error: {e}"


def results(interaction):
    return [s for s in interaction.steps or [] if s.type in ("code_execution_result", "function_result")]


# --- 1. security gate ----------------------------------------------------------------------
g, out = example("1_security_gate.py")
if g:
    i = g["interaction"]
    check("security: deny reason in output_text", RM_REASON in i.output_text, i.output_text)
    check("security: example printed output_text", RM_REASON in out, out)
    r = results(i)
    check(
        "security: code_execution_result is_error with the reason",
        len(r) == 1 and r[0].is_error is True and r[0].result == RM_REASON,
        r,
    )
    env_id = i.environment_id
    # The reference promises the command does not run; give it something to destroy.
    client.environments.files.upload(environment=env_id, path="tmp/forbidden/keep.txt", file=b"keep")
    again = client.interactions.create(
        agent=AGENT, input="Run `rm -rf /tmp/forbidden` using code_execution.", environment=env_id
    )
    check("security: denied again in the same environment", RM_REASON in again.output_text, again.output_text)
    check(
        "security: /tmp/forbidden still exists",
        paths(env_id, "tmp/forbidden") == ["/tmp/forbidden/keep.txt"],
        paths(env_id, "tmp/forbidden"),
    )
    # The sandbox sees the same file, and a command the gate allows does run there.
    seen = client.interactions.create(agent=AGENT, input="Run `ls /tmp/forbidden`", environment=env_id)
    check("security: the sandbox sees /tmp/forbidden", "keep.txt" in seen.output_text, seen.output_text)

# --- 2. privacy gate -----------------------------------------------------------------------
g, out = example("2_privacy_gate.py")
if g:
    int_1, int_2 = g["int_1"], g["int_2"]
    check("privacy: deny reason in int_1.output_text", PII_REASON in int_1.output_text, int_1.output_text)
    check("privacy: no PII in int_1.output_text", "000-00-0000" not in int_1.output_text, int_1.output_text)
    r = results(int_1)
    check("privacy: view_file result is_error", len(r) == 1 and r[0].is_error is True, r)
    check(
        "privacy: int_2 in the same environment",
        bool(int_1.environment_id) and int_2.environment_id == int_1.environment_id,
        (int_1.environment_id, int_2.environment_id),
    )
    check("privacy: int_2 continues int_1", getattr(int_2, "previous_interaction_id", None) == int_1.id, int_2)
    check("privacy: summary.json content in int_2.output_text", SUMMARY in int_2.output_text, int_2.output_text)
    check("privacy: example printed both answers", PII_REASON in out and SUMMARY in out, out)

# --- 3. audit telemetry --------------------------------------------------------------------
events_file = os.environ.get("TELEMETRY_EVENTS")
g, out = example("3_audit_telemetry.py")
if g:
    i = g["interaction"]
    check("telemetry: file written and read back", "event 1" in i.output_text, i.output_text)
    events = []
    if events_file and os.path.exists(events_file):
        with open(events_file) as f:
            events = [json.loads(line) for line in f if line.strip()]
    tools = [e["body"].get("tool_call", {}).get("name") for e in events if isinstance(e["body"], dict)]
    check("telemetry: receiver got write_to_file and view_file", tools == ["write_to_file", "view_file"], events)
    auth = [{k.lower(): v for k, v in e["headers"].items()}.get("authorization") for e in events]
    check("telemetry: Authorization injected on both", len(auth) == 2 and all(a == TOKEN_HEADER for a in auth), auth)
    check(
        "telemetry: payload names the environment",
        len(events) == 2 and all(e["body"].get("environment_id") == i.environment_id for e in events),
        [e["body"] for e in events],
    )
    check(
        "telemetry: posted to the hook's path",
        all(e["path"] == "/api/v1/agent-events" for e in events) and len(events) == 2,
        [e["path"] for e in events],
    )
    check(
        "telemetry: the transform secret is not echoed by the API",
        "telemetry_secret_token_123" not in json.dumps(client.environments.get(i.environment_id).model_dump(mode="json")),
        client.environments.get(i.environment_id),
    )

print(f"{passed} passed, {len(failed)} failed" + (f": {', '.join(failed)}" if failed else ""))
sys.exit(1 if failed else 0)
