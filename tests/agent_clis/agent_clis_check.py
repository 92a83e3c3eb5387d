"""One hookbox policy enforced in four real agent CLIs and in `hookbox serve`.

For each of Claude Code, Gemini CLI, Codex and Copilot (the npm packages, headless, against
fake_model.py on 127.0.0.1 inside the network namespace run.sh made), in a scratch project
whose `.agents/hooks.json` denies `rm -rf`, after `hookbox hooks install --for CLI`:

  deny     the model asks for `rm -rf victim`: the gate denies it, the victim survives, and the
           policy's reason is in the tool result the CLI sends the model next;
  allow    the model asks for a harmless command: it runs (its file appears, its output reaches
           the model);
  missing  the gate is installed with a hookbox that does not exist (`--binary`): the harmless
           command is denied all the same (the installed fallback) and does not run;
  rewrite  the policy answers `updated_args`: the rewritten command runs instead, and its
           output reaches the model;
  context  the policy answers `additional_context`: checked to reach the model in Claude Code
           and Codex (the two CLIs with a field for it), reported for the others.

Codex trusts hooks by hash: its runs use the trust lines `hooks install` prints (added to
$CODEX_HOME/config.toml), not the bypass flag, so a wrong hash fails the deny case. Then the
same policy files in an environment of `hookbox serve`, driven with the google-genai SDK.
Also: installing twice changes nothing, `--uninstall` restores the settings file.

argv: HOOKBOX_BIN CLIS_DIR DATA_DIR. Prints a table (CLI x case: result, seconds, what the model
saw) and ends with `N passed, M failed`.
"""

import json
import os
import platform
import shutil
import subprocess
import sys
import time

hookbox, clis_dir, data = sys.argv[1], sys.argv[2], sys.argv[3]
here = os.path.dirname(os.path.abspath(__file__))
results = []
table = []

POLICY_REASON = "POLICY-DENY: rm -rf is not allowed in this project"
HOOKS = {"no-rm-rf": {"pre_tool_execution": [{"matcher": "code_execution", "hooks": [
    {"type": "command", "command": "python3 /.agents/no_rm_rf.py", "timeout": 30}]}]}}
REWRITTEN = "touch rewritten-ran && echo rewritten-output"
CONTEXT = "POLICY-CONTEXT: mind the style guide"
SCRIPT = f'''import json, sys
call = json.load(sys.stdin)["tool_call"]
code = call["args"].get("code", "")
if "rm -rf" in code:
    print(json.dumps({{"decision": "deny", "reason": "{POLICY_REASON}"}}))
elif "please-rewrite-me" in code:
    print(json.dumps({{"decision": "allow",
                      "updated_args": {{"code": "{REWRITTEN}", "language": "bash"}}}}))
elif "please-add-context" in code:
    print(json.dumps({{"decision": "allow", "additional_context": "{CONTEXT}"}}))
else:
    print(json.dumps({{"decision": "allow"}}))
'''
FALLBACK_REASON = "hookbox hooks gate could not run"
FINAL_TEXT = "FAKE-MODEL-FINAL-TEXT"


def check(name, ok, detail=""):
    results.append((name, bool(ok)))
    print(("ok  " if ok else "FAIL") + " " + name + ("" if ok else f": {detail}"), flush=True)


def wait_for(pred, what, timeout=60):
    """Polls `pred` until it holds; only a hung dependency reaches the bound."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    raise SystemExit(f"gave up waiting for {what}")


# ---------------------------------------------------------------- the fake model server
log = os.path.join(data, "model-requests.jsonl")
port_file = os.path.join(data, "model.port")
server = subprocess.Popen([sys.executable, os.path.join(here, "fake_model.py"),
                           "--log", log, "--port-file", port_file])
wait_for(lambda: os.path.exists(port_file), "the fake model server")
port = int(open(port_file).read())
BASE = f"http://127.0.0.1:{port}"


def requests_of(case):
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [r for r in map(json.loads, f) if r.get("case") == case]


def tool_results(body):
    """The text of every tool result in one request body, in any of the four APIs."""
    out = []
    for c in body.get("contents") or []:
        for p in c.get("parts") or []:
            if "functionResponse" in p:
                out.append(json.dumps(p["functionResponse"].get("response")))
    for m in body.get("messages") or []:
        c = m.get("content")
        if isinstance(c, list):
            for b in c:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    content = b.get("content")
                    out.append(content if isinstance(content, str) else json.dumps(content))
        if m.get("role") == "tool":
            c = m.get("content")
            out.append(c if isinstance(c, str) else json.dumps(c))
    items = body.get("input")
    if isinstance(items, list):
        for it in items:
            if isinstance(it, dict) and str(it.get("type", "")).endswith("_output"):
                o = it.get("output")
                out.append(o if isinstance(o, str) else json.dumps(o))
    return out


def model_saw(case):
    """The first tool result the CLI sent the model in this case ('' if none)."""
    for r in requests_of(case):
        found = tool_results(r.get("body") or {})
        if found:
            return found[0]
    return ""


# ---------------------------------------------------------------- the four CLIs
arch = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
BIN = {
    "claude-code": os.path.join(clis_dir, f"node_modules/@anthropic-ai/claude-code-linux-{arch}/claude"),
    "gemini-cli": os.path.join(clis_dir, "node_modules/.bin/gemini"),
    "codex": os.path.join(clis_dir, "node_modules/.bin/codex"),
    "copilot": os.path.join(clis_dir, "node_modules/.bin/copilot"),
}
# Copilot unpacks its JavaScript into $XDG_CACHE_HOME on first start: kept with the CLIs.
COPILOT_CACHE = os.path.join(clis_dir, ".copilot-cache")
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "TERM": "dumb", "LANG": "C.UTF-8"}


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def user_settings(cli, home, proj):
    """The user-level settings each CLI needs to talk to the fake model only: no telemetry,
    no update checks."""
    if cli == "gemini-cli":
        write(os.path.join(home, ".gemini/settings.json"), json.dumps({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False}}))
    if cli == "codex":
        write(os.path.join(home, ".codex/config.toml"), f'''model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "{BASE}/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
remote_plugin = false
apps = false
in_app_updates = false
''')


def invocation(cli, home, prompt):
    env = dict(BASE_ENV, HOME=home)
    if cli == "claude-code":
        env.update(ANTHROPIC_BASE_URL=BASE, ANTHROPIC_API_KEY="sk-ant-fake", IS_SANDBOX="1",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
                   DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1")
        argv = [BIN[cli], "-p", prompt, "--dangerously-skip-permissions", "--output-format", "json"]
    elif cli == "gemini-cli":
        env.update(GOOGLE_GEMINI_BASE_URL=BASE, GEMINI_API_KEY="fake-key",
                   GEMINI_CLI_TRUST_WORKSPACE="true")
        argv = [BIN[cli], "-p", prompt, "--yolo", "-o", "json"]
    elif cli == "codex":
        env.update(CODEX_HOME=os.path.join(home, ".codex"), FAKE_API_KEY="fake-key")
        # No --dangerously-bypass-hook-trust: the hook is trusted by the hash install printed.
        argv = [BIN[cli], "exec", "--strict-config", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", "--json", prompt]
    else:
        env.update(XDG_CACHE_HOME=COPILOT_CACHE, COPILOT_OFFLINE="true",
                   COPILOT_PROVIDER_BASE_URL=f"{BASE}/v1", COPILOT_PROVIDER_TYPE="openai",
                   COPILOT_PROVIDER_API_KEY="fake-key", COPILOT_MODEL="fake-model")
        argv = [BIN[cli], "-p", prompt, "--yolo", "--trust-folder", "--no-auto-update",
                "--disable-client-telemetry", "--no-ask-user", "--output-format", "json"]
    return argv, env


def install(cli, proj, *extra):
    return subprocess.run([hookbox, "hooks", "install", "--for", cli, *extra], cwd=proj,
                          capture_output=True, text=True, timeout=60)


def codex_trust_lines(install_stdout):
    """The TOML lines `hooks install --for codex` tells the user to add."""
    marker = "add these lines"
    if marker not in install_stdout:
        return ""
    tail = install_stdout.split(marker, 1)[1].split("\n", 1)[1]
    return "\n".join(l for l in tail.splitlines() if not l.startswith("note:")) + "\n"


CASES = {
    "deny": "rm -rf victim && echo removed",
    "allow": "touch allowed-ran && echo allowed-ran-output",
    "missing": "touch should-not-run && echo should-not-run-output",
    "rewrite": "echo please-rewrite-me",
    "context": "echo please-add-context",
}


def run_case(cli, case):
    cid = f"{cli}-{case}"
    top = os.path.join(data, cid)
    proj, home = os.path.join(top, "proj"), os.path.join(top, "home")
    os.makedirs(home)
    write(os.path.join(proj, ".agents/hooks.json"), json.dumps(HOOKS, indent=2))
    write(os.path.join(proj, ".agents/no_rm_rf.py"), SCRIPT)
    write(os.path.join(proj, "victim/file.txt"), "precious\n")
    user_settings(cli, home, proj)
    extra = ["--binary", "/nonexistent/hookbox"] if case == "missing" else []
    inst = install(cli, proj, *extra)
    check(f"{cid}: hooks install succeeds and shows the diff",
          inst.returncode == 0 and "+++" in inst.stdout, inst.stdout + inst.stderr)
    if cli == "codex":
        with open(os.path.join(home, ".codex/config.toml"), "a") as f:
            f.write("\n" + codex_trust_lines(inst.stdout))
    prompt = f"<<case:{cid}>> Please run this command: <<run:{CASES[case]}>>"
    argv, env = invocation(cli, home, prompt)
    t0 = time.monotonic()
    try:
        run = subprocess.run(argv, cwd=proj, env=env, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=300)
        out = run.stdout + run.stderr
    except subprocess.TimeoutExpired as e:
        out = f"timed out: {e}"
    seconds = time.monotonic() - t0
    saw = model_saw(cid)
    if case == "deny":
        ok_ran = os.path.exists(os.path.join(proj, "victim/file.txt"))
        check(f"{cid}: rm -rf did not run (the victim survives)", ok_ran, out[-2000:])
        ok_saw = POLICY_REASON in saw
        check(f"{cid}: the model was told the policy's reason", ok_saw, saw or out[-2000:])
        result = "denied" if ok_ran and ok_saw else "FAILED"
    elif case == "allow":
        ok_ran = os.path.exists(os.path.join(proj, "allowed-ran"))
        check(f"{cid}: the allowed command ran", ok_ran, out[-2000:])
        ok_saw = "allowed-ran-output" in saw
        check(f"{cid}: the model saw its output", ok_saw, saw or out[-2000:])
        result = "ran" if ok_ran and ok_saw else "FAILED"
    elif case == "rewrite":
        ok_ran = os.path.exists(os.path.join(proj, "rewritten-ran"))
        check(f"{cid}: the policy's rewrite ran instead of the model's command", ok_ran,
              out[-2000:])
        ok_saw = "rewritten-output" in saw
        check(f"{cid}: the model saw the rewritten command's output", ok_saw, saw or out[-2000:])
        result = "rewritten" if ok_ran and ok_saw else "FAILED"
    elif case == "context":
        everything = json.dumps([r.get("body") for r in requests_of(cid)])
        delivered = CONTEXT in everything
        # Only Claude Code and Codex have a field that reaches the model (docs/vendor-hooks.md).
        if cli in ("claude-code", "codex"):
            check(f"{cid}: the policy's context reached the model", delivered, saw)
        result = "context reached the model" if delivered else "context not delivered"
    else:
        ok_ran = not os.path.exists(os.path.join(proj, "should-not-run"))
        check(f"{cid}: with the gate missing the command did not run", ok_ran, out[-2000:])
        # Copilot reports only "hook errored" / "exit code 2"; the others pass the reason on.
        ok_saw = bool(saw) and (cli == "copilot" or FALLBACK_REASON in saw)
        check(f"{cid}: the model was told the call was denied", ok_saw, saw or out[-2000:])
        result = "denied" if ok_ran and ok_saw else "FAILED"
    table.append((cli, case, result, seconds, saw))
    return proj


def idempotence_and_uninstall(cli, proj):
    path = {"claude-code": ".claude/settings.json", "gemini-cli": ".gemini/settings.json",
            "codex": ".codex/hooks.json", "copilot": ".github/hooks/hookbox-gate.json"}[cli]
    settings = os.path.join(proj, path)
    before = open(settings).read()
    again = install(cli, proj)
    check(f"{cli}: installing again changes nothing",
          again.returncode == 0 and open(settings).read() == before
          and "already installed" in again.stdout, again.stdout + again.stderr)
    gone = install(cli, proj, "--uninstall")
    if cli == "copilot":
        restored = not os.path.exists(settings)
    else:
        restored = json.load(open(settings)) == {}
    check(f"{cli}: --uninstall removes only the gate", gone.returncode == 0 and restored,
          gone.stdout + gone.stderr)


for cli in ["claude-code", "gemini-cli", "codex", "copilot"]:
    proj = None
    for case in CASES:
        p = run_case(cli, case)
        proj = proj or p
    idempotence_and_uninstall(cli, proj)

server.terminate()
server.wait(timeout=30)


# ---------------------------------------------------------------- the same policy in serve
def serve_leg():
    from google import genai
    serve_data = os.path.join(data, "serve")
    os.makedirs(serve_data)
    proc = subprocess.Popen(
        [hookbox, "serve", "--listen", "127.0.0.1:0", "--data-dir", serve_data],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={k: v for k, v in os.environ.items() if k != "GEMINI_API_KEY"})
    url = None
    for line in proc.stdout:
        if line.startswith("hookbox is listening on http://"):
            url = line.split()[4]
        if line.startswith("or set "):
            break
    try:
        client = genai.Client(api_key="local",
                              http_options={"base_url": url, "api_version": "v1beta"})
        env = {"type": "remote", "sources": [
            {"type": "inline", "target": ".agents/hooks.json", "content": json.dumps(HOOKS)},
            {"type": "inline", "target": ".agents/no_rm_rf.py", "content": SCRIPT},
            {"type": "inline", "target": "workspace/victim/file.txt", "content": "precious\n"},
        ]}
        agent = "antigravity-preview-09-2026"
        t0 = time.monotonic()
        denied = client.interactions.create(
            agent=agent, environment=env,
            input="Run `rm -rf /workspace/victim && echo removed`.")
        seconds = time.monotonic() - t0
        text = " ".join(s.content[0].text for s in denied.steps
                        if s.type == "model_output" and s.content)
        survived = client.environments.files.download(
            environment=denied.environment_id, path="/workspace/victim/file.txt")
        check("serve: rm -rf is denied with the policy's reason", POLICY_REASON in text, text)
        check("serve: the victim survives", bool(survived))
        table.append(("hookbox serve", "deny", "denied" if POLICY_REASON in text else "FAILED",
                      seconds, text))
        t0 = time.monotonic()
        allowed = client.interactions.create(
            agent=agent, environment=denied.environment_id,
            input="Run `touch /workspace/allowed-ran && echo allowed-ran-output`.")
        seconds = time.monotonic() - t0
        text = " ".join(s.content[0].text for s in allowed.steps
                        if s.type == "model_output" and s.content)
        ran = client.environments.files.download(
            environment=denied.environment_id, path="/workspace/allowed-ran") is not None
        check("serve: the allowed command runs", ran and "allowed-ran-output" in text, text)
        table.append(("hookbox serve", "allow", "ran" if ran else "FAILED", seconds, text))
    finally:
        proc.terminate()
        proc.wait(timeout=60)


serve_leg()

print("\n| CLI | case | result | seconds | what the model saw (tool result) |")
print("|---|---|---|---|---|")
for cli, case, result, seconds, saw in table:
    shown = " ".join(saw.split())[:160].replace("|", "\\|")
    print(f"| {cli} | {case} | {result} | {seconds:.1f} | {shown} |")
passed = sum(1 for _, ok in results if ok)
print(f"\n{passed} passed, {len(results) - passed} failed")
sys.exit(0 if passed == len(results) else 1)
