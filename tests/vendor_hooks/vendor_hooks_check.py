"""Other agent CLIs' hooks files run by `hookbox serve`, through the unmodified google-genai SDK.

The environment's tree holds three gates, written as each CLI's users write them:
- `.claude/settings.json`: a PreToolUse Bash hook that exits 2 on `rm -rf` (stderr = reason);
- `.gemini/settings.json`: a BeforeTool run_shell_command hook that answers
  `{"decision": "deny"}` on `git push --force`;
- `.github/hooks/policy.json`: a Copilot preToolUse hook that answers `permissionDecision:
  deny` for creating `.env`.

1. with `--hook-dialects claude-code,gemini-cli,copilot`, each gate denies its call: nothing
   runs and the model sees each gate's own reason; an allowed call runs;
2. with the dialects off (the default), the same tree behaves exactly as without those files:
   the call the Claude gate would deny runs;
3. a project's `hook_dialects` in the config file enables only the dialects it names;
4. (in 1.) a Cursor `beforeReadFile` hook denies by the file's `content`, a Claude hook reads the interaction's steps at its `transcript_path`, and a
   PostToolUse hook sees the tool's stdout in `tool_response`.

argv: HOOKBOX_BIN DATA_DIR. Ends with `N passed, M failed`.
"""

import json
import os
import subprocess
import sys
import warnings

from google import genai

warnings.simplefilter("ignore")
hookbox, data = sys.argv[1], sys.argv[2]
AGENT = "antigravity-preview-09-2026"
results = []

CLAUDE = json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
    {"type": "command", "command": "sh \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/no-rm.sh", "timeout": 30},
    {"type": "command", "command": "python3 \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/transcript.py", "timeout": 30}]}],
    "PostToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "python3 \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/saw_output.py", "timeout": 30}]}]}})
# Reads the interaction's steps at transcript_path (twice) when the command names the probe, and
# denies with what it found: the model sees it.
TRANSCRIPT = r'''
import json, sys
data = json.load(sys.stdin)
if "TRANSCRIPT-PROBE" in data["tool_input"]["command"]:
    path = data["transcript_path"]
    lines = [json.loads(l) for l in open(path)]
    again = len(open(path).read().splitlines())
    mine = any("TRANSCRIPT-PROBE" in json.dumps(l) for l in lines if l["type"] == "user_input")
    other = any("rm -rf" in json.dumps(l) for l in lines)
    last = lines[-1]["type"] if lines else "none"
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": f"transcript: lines={len(lines)} again={again} mine={mine} other={other} last={last}"}}))
'''
# Adds what the tool printed to the model's context, as Claude's PostToolUse does.
SAW_OUTPUT = r'''
import json, sys
data = json.load(sys.stdin)
if "OUTPUT-PROBE" in data["tool_input"]["command"]:
    out = data["tool_response"]["stdout"].strip()
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": f"post hook saw stdout [{out}]"}}))
'''
NO_RM = r'''#!/bin/sh
input=$(cat)
case "$input" in *"rm -rf"*) echo "claude gate: rm -rf is not allowed here" >&2; exit 2 ;; esac
exit 0
'''
GEMINI = json.dumps({"hooks": {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [
    {"type": "command", "name": "no-force-push", "command": "python3 $GEMINI_PROJECT_DIR/.gemini/no_force_push.py", "timeout": 30000}]}]}})
NO_FORCE_PUSH = r'''
import json, sys
data = json.load(sys.stdin)
if "push --force" in data["tool_input"]["command"]:
    print(json.dumps({"decision": "deny", "reason": "gemini gate: no force-push"}))
'''
COPILOT = json.dumps({"version": 1, "hooks": {"preToolUse": [
    {"type": "command", "bash": "python3 .github/hooks/env_guard.py", "timeoutSec": 30}]}})
ENV_GUARD = r'''
import json, os, sys
data = json.load(sys.stdin)
args = data.get("toolArgs") or {}
if data.get("toolName") == "create" and os.path.basename(args.get("path", "")) == ".env":
    print(json.dumps({"permissionDecision": "deny", "permissionDecisionReason": "copilot gate: .env holds secrets"}))
'''

# Cursor's beforeReadFile gets the file's `content`: deny reading a file holding a marker.
CURSOR = json.dumps({"version": 1, "hooks": {"beforeReadFile": [
    {"command": "python3 .cursor/read_guard.py"}]}})
READ_GUARD = r'''
import json, sys
data = json.load(sys.stdin)
if "SECRET-MARKER" in data.get("content", ""):
    print(json.dumps({"permission": "deny", "agent_message": "cursor gate: the file holds a secret marker"}))
'''


def inline(target, content):
    return {"type": "inline", "target": target, "content": content}


ENV = {"type": "remote", "sources": [
    inline("workspace/.claude/settings.json", CLAUDE),
    inline("workspace/.claude/hooks/no-rm.sh", NO_RM),
    inline("workspace/.claude/hooks/transcript.py", TRANSCRIPT),
    inline("workspace/.claude/hooks/saw_output.py", SAW_OUTPUT),
    inline("workspace/.gemini/settings.json", GEMINI),
    inline("workspace/.gemini/no_force_push.py", NO_FORCE_PUSH),
    inline("workspace/.github/hooks/policy.json", COPILOT),
    inline("workspace/.github/hooks/env_guard.py", ENV_GUARD),
    inline("workspace/victim/keep.txt", "precious\n"),
    inline("workspace/.cursor/hooks.json", CURSOR),
    inline("workspace/.cursor/read_guard.py", READ_GUARD),
    inline("workspace/notes.txt", "plain line\nSECRET-MARKER\n"),
]}


def check(name, ok, detail=""):
    results.append((name, bool(ok)))
    print(("ok  " if ok else "FAIL") + " " + name + ("" if ok else f": {detail}"))


def serve(*extra):
    """A `hookbox serve` on a free loopback port; (process, base URL) once its banner is out."""
    proc = subprocess.Popen(
        [hookbox, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={k: v for k, v in os.environ.items() if k not in ("GEMINI_API_KEY", "HOOKBOX_HOOK_DIALECTS")},
    )
    url = None
    for line in proc.stdout:
        if line.startswith("hookbox is listening on http://"):
            url = line.split()[4]
        if line.startswith("or set "):
            break
    return proc, url


def client(base):
    return genai.Client(api_key="local", http_options={"base_url": base, "api_version": "v1beta"})


def text_of(interaction):
    return " ".join(s.content[0].text for s in interaction.steps
                    if s.type == "model_output" and s.content)


def exists(c, env, path):
    try:
        c.environments.files.download(environment=env, path=path)
        return True
    except Exception as e:
        status = getattr(e, "status_code", None) or getattr(e, "code", None)
        if status == 404:
            return False
        raise


def stop(proc):
    proc.terminate()
    proc.wait(timeout=60)


# 1. Enabled in one line.
proc, base = serve("--hook-dialects", "claude-code,gemini-cli,copilot,cursor")
try:
    c = client(base)
    done = c.interactions.create(agent=AGENT, environment=ENV, input="Run `rm -rf /workspace/victim`.")
    env = done.environment_id
    check("claude gate: rm -rf denied, the model sees the hook's stderr",
          "claude gate: rm -rf is not allowed here" in text_of(done), text_of(done))
    check("claude gate: nothing ran", exists(c, env, "/workspace/victim/keep.txt"))
    done = c.interactions.create(agent=AGENT, environment=env,
                                 input="Run `git push --force origin main || touch /workspace/pushed`.")
    check("gemini gate: force-push denied with its JSON reason",
          "gemini gate: no force-push" in text_of(done), text_of(done))
    check("gemini gate: nothing ran", not exists(c, env, "/workspace/pushed"))
    done = c.interactions.create(agent=AGENT, environment=env,
                                 input="Create `/workspace/.env` containing 'TOKEN=1'.")
    check("copilot gate: .env create denied with permissionDecisionReason",
          "copilot gate: .env holds secrets" in text_of(done), text_of(done))
    check("copilot gate: nothing written", not exists(c, env, "/workspace/.env"))
    done = c.interactions.create(agent=AGENT, environment=env, input="Run `echo fine > /workspace/ok.txt`.")
    check("an allowed call runs", c.environments.files.download(environment=env, path="/workspace/ok.txt") == b"fine\n",
          text_of(done))
    done = c.interactions.create(agent=AGENT, environment=env, input="Read `/workspace/notes.txt`.")
    check("cursor beforeReadFile sees the file's content and denies",
          "cursor gate: the file holds a secret marker" in text_of(done), text_of(done))
    done = c.interactions.create(agent=AGENT, environment=env, input="Run `echo TRANSCRIPT-PROBE`.")
    check("transcript_path: a real file of this interaction's steps up to the call, read twice",
          "transcript: lines=2 again=2 mine=True other=False last=code_execution_call" in text_of(done),
          text_of(done))
    done = c.interactions.create(agent=AGENT, environment=env, input="Run `echo OUTPUT-PROBE-42`.")
    check("PostToolUse tool_response carries the tool's stdout",
          "post hook saw stdout [OUTPUT-PROBE-42]" in json.dumps([s.model_dump(mode="json") for s in done.steps]),
          text_of(done))
finally:
    stop(proc)

# 2. Off by default: exactly as before.
proc, base = serve()
try:
    c = client(base)
    done = c.interactions.create(agent=AGENT, environment=ENV, input="Run `rm -rf /workspace/victim`.")
    check("dialects off: the vendor files are ignored, the call runs as before",
          not exists(c, done.environment_id, "/workspace/victim/keep.txt")
          and "claude gate" not in text_of(done), text_of(done))
finally:
    stop(proc)

# 3. Per project: the config file's `[projects.default] hook_dialects` (local mode's project).
config = os.path.join(data, "hookbox.toml")
with open(config, "w") as f:
    f.write('[projects.default]\nhook_dialects = "claude-code"\n')
proc, base = serve("--config", config)
try:
    c = client(base)
    done = c.interactions.create(agent=AGENT, environment=ENV, input="Run `rm -rf /workspace/victim`.")
    check("per project: [projects.default] hook_dialects enables the Claude gate",
          "claude gate: rm -rf is not allowed here" in text_of(done)
          and exists(c, done.environment_id, "/workspace/victim/keep.txt"), text_of(done))
    done = c.interactions.create(agent=AGENT, environment=done.environment_id,
                                 input="Run `git push --force origin main || touch /workspace/pushed`.")
    check("per project: the dialects it does not name stay off (the Gemini gate is ignored)",
          exists(c, done.environment_id, "/workspace/pushed"), text_of(done))
finally:
    stop(proc)

passed = sum(1 for _, ok in results if ok)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if passed == len(results) else 1)
