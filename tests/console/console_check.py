"""The console against a real `hookbox serve`, in headless Chromium through chromedriver.

argv: HOOKBOX_BIN DATA_DIR SECURITY_GATE_AGENTS_DIR SCREENSHOT_DIR
"""
import json
from datetime import datetime, timedelta
import os
import subprocess
import sys
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

hookbox, data, gate_dir, shots = sys.argv[1:5]
os.makedirs(shots, exist_ok=True)
results = []


def check(name, ok, detail=""):
    results.append((name, bool(ok)))
    print(("ok  " if ok else "FAIL") + " " + name + ("" if ok else f": {detail}"))


def serve(data_dir, *extra):
    """A `hookbox serve` on a free loopback port; (process, base URL) once its banner is out."""
    proc = subprocess.Popen(
        [hookbox, "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={k: v for k, v in os.environ.items() if k not in ("HOOKBOX_API_KEYS", "GEMINI_API_KEY")},
    )
    url = None
    for line in proc.stdout:
        if line.startswith("hookbox is listening on http://"):
            url = line.split()[4]
        if line.startswith("or set "):
            break
    return proc, url


# blocked.example: a name that resolves (pinned) to an address the SSRF guard blocks.
server, base = serve(os.path.join(data, "d"), "--egress-resolve", "blocked.example:9=127.0.0.2:9")
# A second server whose environments expire after 1 s, for the expired status.
ttl_config = os.path.join(data, "ttl.toml")
with open(ttl_config, "w") as f:
    f.write("[quotas]\nenvironment_ttl_seconds = 1\n")
expiring, expiring_base = serve(os.path.join(data, "e"), "--config", ttl_config, "--expiry-interval", "0.2")


def post(path, body, at=None):
    req = urllib.request.Request((at or base) + path, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def get(path, at=None):
    with urllib.request.urlopen((at or base) + path, timeout=60) as r:
        return json.load(r)


try:
    read = lambda p: open(os.path.join(gate_dir, p)).read()
    env = post("/v1beta/environments", {"sources": [
        {"type": "inline", "target": ".agents/hooks.json", "content": read("hooks.json")},
        {"type": "inline", "target": ".agents/hooks-scripts/gate.py", "content": read("hooks-scripts/gate.py")},
        {"type": "inline", "target": "workspace/notes.txt", "content": "kept"},
    ]})["id"]
    agent = "antigravity-preview-09-2026"
    allowed = post("/v1beta/interactions", {"agent": agent, "input": "run `ls /workspace`", "environment": env})
    denied = post("/v1beta/interactions", {"agent": agent, "input": "Run `rm -rf /tmp/forbidden` using code_execution.", "environment": env})
    check("setup: the gate denied", denied["steps"][2]["is_error"] is True, denied)
    hostile = post("/v1beta/interactions", {"agent": agent, "input": 'Say <img src=x onerror="window.__pwned=1">', "environment": env})

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    downloads = os.path.join(data, "downloads")
    os.makedirs(downloads)
    options.add_experimental_option("prefs", {"download.default_directory": downloads, "download.prompt_for_download": False})
    browser = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    browser.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
    wait = WebDriverWait(browser, 30)
    try:
        browser.get(base + "/console")
        check("console: loads", "hookbox console" in browser.title, browser.title)
        # Local mode (loopback, no API keys) needs no login (#31 item 8).
        row = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f'tr[data-id="{denied["id"]}"]')))
        check("local mode: lists the interactions without a login", row.is_displayed()
              and not browser.find_element(By.ID, "login").is_displayed())
        check("local mode: says so", browser.find_element(By.ID, "who").text == "local mode",
              browser.find_element(By.ID, "who").text)
        rows = [r.get_attribute("data-id") for r in browser.find_elements(By.CSS_SELECTOR, "#list tr")]
        check("list: newest first", rows == [hostile["id"], denied["id"], allowed["id"]], rows)
        browser.save_screenshot(os.path.join(shots, "interactions.png"))

        row.click()
        reason = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".reason")))
        check("timeline: shows the deny reason", "Destructive command blocked by security gate." in reason.text, reason.text)
        deny = browser.find_elements(By.CSS_SELECTOR, "span.deny")
        check("timeline: the decision is highlighted", any(d.text == "deny" for d in deny), [d.text for d in deny])
        steps = [h.text.lower() for h in browser.find_elements(By.CSS_SELECTOR, ".step h4")]
        check("timeline: every step", steps == ["user input", "code execution call", "code execution result", "model output"], steps)
        browser.save_screenshot(os.path.join(shots, "timeline.png"))

        browser.find_element(By.ID, "nav-environments").click()
        env_row = wait.until(ec.presence_of_element_located((By.XPATH, f'//tbody[@id="envs"]/tr[td="{env}"]')))
        env_row.click()
        listed = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#e-files li")))
        files = browser.find_element(By.ID, "e-files").text
        check("environments: the file browser lists the tree", "notes.txt" in files and "hooks.json" in files, files)
        report = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#e-hooks .hooks-ok, #e-hooks .diagnostic")))
        check("environments: the hooks check report of a good file", report.text == "no problems found", report.text)
        browser.save_screenshot(os.path.join(shots, "environments.png"))
        # A broken hooks file is reported with its JSONPath, as `hooks check` does.
        broken = post("/v1beta/environments", {"sources": [
            {"type": "inline", "target": ".agents/hooks.json",
             "content": '{"g": {"pre_tool_execution": [{"matcher": "(", "hooks": [{"type": "command", "command": "true"}]}]}}'},
        ]})["id"]
        browser.get(base + "/console#/environments")
        browser.refresh()  # the same page and hash would not reload the list
        # The list marks the environment whose hooks file is broken, and only that one (#31).
        marked = wait.until(ec.presence_of_element_located(
            (By.XPATH, f'//tbody[@id="envs"]/tr[td="{broken}"][@data-hooks="broken"]')))
        check("environments: the list marks broken hooks", "broken hooks" in marked.text, marked.text)
        good = wait.until(ec.presence_of_element_located(
            (By.XPATH, f'//tbody[@id="envs"]/tr[td="{env}"][@data-hooks]')))
        check("environments: a good file is not marked", good.get_attribute("data-hooks") == "ok"
              and "broken hooks" not in good.text, good.text)
        wait.until(ec.presence_of_element_located((By.XPATH, f'//tbody[@id="envs"]/tr[td="{broken}"]'))).click()
        diagnostic = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#e-hooks .diagnostic")))
        check("environments: a broken matcher is reported with its path", "matcher" in diagnostic.text, diagnostic.text)
        browser.save_screenshot(os.path.join(shots, "hooks-check.png"))
        # A hook that fails lets the call through (the reference's fail-open): highlighted.
        failing = post("/v1beta/environments", {"sources": [
            {"type": "inline", "target": ".agents/hooks.json",
             "content": '{"flaky": {"pre_tool_execution": [{"matcher": "code_execution", "hooks": [{"type": "command", "command": "echo scanner unreachable >&2; exit 3"}]}]}}'},
        ]})["id"]
        opened = post("/v1beta/interactions", {"agent": agent, "input": "run `true`", "environment": failing})
        browser.get(base + "/console#/interactions/" + opened["id"])
        browser.refresh()
        flagged = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".hook span.failopen")))
        check("timeline: a fail-open hook is highlighted", flagged.text == "failed_open", flagged.text)
        browser.save_screenshot(os.path.join(shots, "fail-open.png"))
        # Overview: guard health over a window from GET /stats (computed from the store), drawn
        # as SVG; denies and fail-opens listed with their reason or the handler's stderr.
        stats = get("/v1beta/stats?window=3600")
        guards = {g["group"]: g for g in stats["guards"]}
        check("stats: the gate's deny and the flaky guard's fail-open with its cause",
              guards.get("security-gate", {}).get("outcomes", {}).get("deny") == 1
              and guards.get("flaky", {}).get("failed_open_causes") == {"non_zero_exit": 1}, stats["guards"])
        check("stats: the fail-open event carries the handler's stderr",
              any(e["outcome"] == "failed_open" and "scanner unreachable" in (e["stderr"] or "") for e in stats["events"]),
              stats["events"])
        check("stats: interactions by status and latency percentiles",
              stats["interactions"]["by_status"].get("completed", 0) >= 4
              and guards.get("security-gate", {}).get("latency_ms", {}).get("p99") is not None, stats)
        try:
            get("/v1beta/stats?window=5")
            check("stats: a window out of range is refused", False, "answered 200")
        except urllib.error.HTTPError as e:
            check("stats: a window out of range is refused", e.code == 400, e.code)
        browser.get(base + "/console#/overview")
        browser.refresh()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, '#o-decision-chart rect[data-key="failed_open"]')))
        check("overview: decisions chart draws deny and fail-open bars",
              browser.find_elements(By.CSS_SELECTOR, '#o-decision-chart rect[data-key="deny"]')
              and browser.find_elements(By.CSS_SELECTOR, '#o-decision-chart rect[data-key="allow"]'))
        check("overview: interactions chart draws completed bars",
              browser.find_elements(By.CSS_SELECTOR, '#o-status-chart rect[data-key="completed"]'))
        check("overview: tiles count the deny and the fail-open",
              browser.find_element(By.ID, "o-denied").text == "1" and browser.find_element(By.ID, "o-failopen").text == "1",
              [browser.find_element(By.ID, i).text for i in ("o-denied", "o-failopen")])
        bars = {(r.get_attribute("data-group"), r.get_attribute("data-p")): int(r.get_attribute("data-ms"))
                for r in browser.find_elements(By.CSS_SELECTOR, "#o-latency-chart rect")}
        gate_ms = guards["security-gate"]["latency_ms"]
        check("overview: latency chart draws p50/p95/p99 per guard, as the API computed them",
              bars.get(("security-gate", "p99")) == gate_ms["p99"] and bars.get(("flaky", "p50")) == guards["flaky"]["latency_ms"]["p50"]
              and len(bars) == 6, bars)
        flaky_row = browser.find_element(By.CSS_SELECTOR, '#o-guards tr[data-group="flaky"]')
        gate_bar = {r.get_attribute("data-key"): r.get_attribute("data-count")
                    for r in browser.find_elements(By.CSS_SELECTOR, '#o-guards tr[data-group="security-gate"] rect')}
        check("overview: each guard's decisions drawn as a bar by outcome", gate_bar == {"allow": "1", "deny": "1"}, gate_bar)
        check("overview: the guards table shows fail-opens by cause", "non_zero_exit 1" in flaky_row.text, flaky_row.text)
        open_row = browser.find_element(By.CSS_SELECTOR, '#o-events tr[data-outcome="failed_open"]')
        check("overview: a fail-open row is marked and shows the handler's stderr",
              "ev-failed_open" in open_row.get_attribute("class")
              and "scanner unreachable" in open_row.find_element(By.CSS_SELECTOR, "pre.stderr").text, open_row.text)
        deny_row = browser.find_element(By.CSS_SELECTOR, '#o-events tr[data-outcome="deny"]')
        check("overview: a deny row is marked with its reason",
              "ev-deny" in deny_row.get_attribute("class") and "Destructive command blocked" in deny_row.text, deny_row.text)
        # Quota use per project (#31): the API's limits and counts, drawn as one bar per quota.
        quota_api = {q["quota"]: q for p in stats["quotas"] for q in p["quotas"]}
        quota_bars = {r.get_attribute("data-quota"): (int(r.get_attribute("data-used")), int(r.get_attribute("data-limit")))
                      for r in browser.find_elements(By.CSS_SELECTOR, '#o-quota-chart rect.quota-bar[data-project="default"]')}
        check("overview: quota use per project drawn as the API counts it",
              [p["project"] for p in stats["quotas"]] == ["default"]
              and quota_api.get("environments", {}).get("used", 0) >= 3
              and quota_bars == {k: (q["used"], q["limit"]) for k, q in quota_api.items()}
              and set(quota_bars) == {"environments", "running_interactions", "sandbox_processes", "live_sockets"},
              (quota_bars, stats["quotas"]))
        day_range = browser.find_element(By.ID, "o-range").text
        Select(browser.find_element(By.ID, "o-window")).select_by_value("3600")
        wait.until(lambda b: b.find_element(By.ID, "o-range").text not in ("", day_range))
        start, end = browser.find_element(By.ID, "o-range").text.split(" to ")
        check("overview: the window can be chosen (last hour)",
              datetime.fromisoformat(end.replace("Z", "+00:00")) - datetime.fromisoformat(start.replace("Z", "+00:00"))
              == timedelta(hours=1), (start, end))
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, '#o-events tr[data-outcome="failed_open"]')))
        deny_row = browser.find_element(By.CSS_SELECTOR, '#o-events tr[data-outcome="deny"]')
        browser.set_window_size(1280, 2000)
        browser.save_screenshot(os.path.join(shots, "overview.png"))
        browser.set_window_size(1280, 900)
        browser.find_element(By.ID, "o-search").send_keys("scanner unreachable")
        visible = [r.get_attribute("data-outcome") for r in browser.find_elements(By.CSS_SELECTOR, "#o-events tr") if r.is_displayed()]
        check("overview: search keeps only matching rows", visible == ["failed_open"], visible)
        browser.find_element(By.ID, "o-search").clear()
        browser.execute_script("document.getElementById('o-search').dispatchEvent(new Event('input'))")
        deny_row.find_element(By.CSS_SELECTOR, f'a[href="#/interactions/{denied["id"]}"]').click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "t-title"), denied["id"]))
        check("overview: an interaction id is a link to its timeline", browser.current_url.endswith("#/interactions/" + denied["id"]))
        browser.get(base + "/console#/overview")
        browser.refresh()
        env_link = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f'#o-events a[href="#/environments/{failing}"]')))
        env_link.click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "e-title"), failing))
        check("overview: an environment id is a link to the environment", browser.find_element(By.ID, "e-title").text == failing)
        # An interaction's own hooks are never invisible (#31): a pre_interaction handler that
        # failed (fail-open) is marked with its stderr, the context the model got is shown, and
        # the post_interaction hooks follow the steps.
        turn_hooks = json.dumps({"turn-guard": {
            "pre_interaction": [{"matcher": "*", "hooks": [
                {"type": "command", "command": "cat >/dev/null; echo 'policy server unreachable' >&2; exit 4"},
                {"type": "command", "command": "cat >/dev/null; echo '{\"decision\": \"allow\", \"additional_context\": \"deploys freeze on fridays\"}'"}]}],
            "post_interaction": [{"matcher": "*", "hooks": [{"type": "command", "command": "cat >/dev/null"}]}]}})
        turn_env = post("/v1beta/environments", {"sources": [{"type": "inline", "target": ".agents/hooks.json", "content": turn_hooks}]})["id"]
        turned = post("/v1beta/interactions", {"agent": agent, "input": "run `echo turn`", "environment": turn_env})
        browser.get(base + "/console#/interactions/" + turned["id"])
        browser.refresh()
        failed_handler = wait.until(ec.presence_of_element_located(
            (By.CSS_SELECTOR, '.interaction-hooks[data-event="pre_interaction"] .ih-handler[data-outcome="failed_open"]')))
        check("timeline: a failed pre_interaction handler is marked with its cause and stderr",
              failed_handler.find_element(By.CSS_SELECTOR, "span.failopen").text == "failed_open"
              and "non_zero_exit" in failed_handler.text
              and "policy server unreachable" in failed_handler.find_element(By.CSS_SELECTOR, "pre.stderr").text, failed_handler.text)
        context = [c.text for c in browser.find_elements(By.CSS_SELECTOR, '.interaction-hooks[data-event="pre_interaction"] .ih-context')]
        check("timeline: the pre_interaction context the model got is shown", context == ["context for the model: deploys freeze on fridays"], context)
        post_hooks = browser.find_elements(By.CSS_SELECTOR, '#t-hooks-post .interaction-hooks[data-event="post_interaction"] .ih-handler')
        check("timeline: the post_interaction hooks follow the steps", [h.get_attribute("data-outcome") for h in post_hooks] == ["completed"],
              [h.text for h in post_hooks])
        browser.save_screenshot(os.path.join(shots, "interaction-hooks.png"))
        turn_events = [e for e in get("/v1beta/stats?window=3600")["events"] if e["interaction_id"] == turned["id"]]
        check("stats: an interaction hook's fail-open counts, with its stderr",
              [(e["event"], e["outcome"], e["group"]) for e in turn_events] == [("pre_interaction", "failed_open", "turn-guard")]
              and "policy server unreachable" in (turn_events[0]["stderr"] or ""), turn_events)
        # A running interaction's timeline is live: it changes when the interaction does,
        # without a reload (the page follows the SSE stream).
        running = post("/v1beta/interactions", {"agent": agent, "input": "run `sleep 120`", "environment": env, "background": True})
        browser.get(base + "/console#/interactions/" + running["id"])
        browser.refresh()
        wait.until(ec.text_to_be_present_in_element((By.ID, "t-meta"), "in_progress"))
        wait.until(ec.text_to_be_present_in_element((By.ID, "t-steps"), "sleep 120"))
        post("/v1beta/interactions/" + running["id"] + "/cancel", {})
        wait.until(ec.text_to_be_present_in_element((By.ID, "t-meta"), "cancelled"))
        check("timeline: a running interaction updates live", "cancelled" in browser.find_element(By.ID, "t-meta").text)
        # The Interactions list marks denies and fail-opens per row and can be searched (#31 item 5).
        browser.get(base + "/console#/interactions")
        browser.refresh()
        marked_deny = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f'#list tr[data-id="{denied["id"]}"]')))
        marked_open = browser.find_element(By.CSS_SELECTOR, f'#list tr[data-id="{opened["id"]}"]')
        plain_row = browser.find_element(By.CSS_SELECTOR, f'#list tr[data-id="{allowed["id"]}"]')
        check("list: a denied call's row is marked", marked_deny.get_attribute("data-marks") == "deny"
              and "denied 1" in marked_deny.text, marked_deny.text)
        check("list: a fail-open row is marked", marked_open.get_attribute("data-marks") == "failed_open"
              and "failed open 1" in marked_open.text, marked_open.text)
        check("list: a row with neither is not marked", plain_row.get_attribute("data-marks") == "", plain_row.text)
        turned_row = browser.find_element(By.CSS_SELECTOR, f'#list tr[data-id="{turned["id"]}"]')
        check("list: an interaction hook that failed open marks its row", turned_row.get_attribute("data-marks") == "failed_open"
              and "failed open 1" in turned_row.text, turned_row.text)
        browser.find_element(By.ID, "f-search").send_keys("failed_open")
        visible = [r.get_attribute("data-id") for r in browser.find_elements(By.CSS_SELECTOR, "#list tr") if r.is_displayed()]
        # The interaction whose own pre_interaction handler failed open is marked too.
        check("list: search by mark keeps only the fail-open rows (a tool call's, an interaction hook's)",
              sorted(visible) == sorted([opened["id"], turned["id"]]), visible)
        browser.save_screenshot(os.path.join(shots, "interactions-marked.png"))
        browser.find_element(By.ID, "f-search").clear()
        browser.find_element(By.ID, "f-search").send_keys(denied["id"])
        visible = [r.get_attribute("data-id") for r in browser.find_elements(By.CSS_SELECTOR, "#list tr") if r.is_displayed()]
        check("list: search by id", visible == [denied["id"]], visible)
        browser.find_element(By.ID, "f-search").clear()
        browser.execute_script("document.getElementById('f-search').dispatchEvent(new Event('input'))")
        # A running call's output streams into the timeline under a running mark (#31 item 5):
        # the code prints a line, then waits for a file this test creates once the line is shown.
        stream_env = post("/v1beta/environments", {"sources": [
            {"type": "inline", "target": "workspace/readme.txt", "content": "x"}]})["id"]
        code = ("echo first line; i=0; while [ ! -e /workspace/go ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done;"
                " echo released")
        streaming = post("/v1beta/interactions", {"agent": agent, "input": f"run `{code}`", "environment": stream_env,
                                                   "background": True})
        # The console is opened only once the line is out (read here from the API's own
        # stream), as an operator opens a call already running: it must show what was printed.
        with urllib.request.urlopen(base + "/v1beta/interactions/" + streaming["id"] + "?stream=true", timeout=120) as s:
            for line in s:
                if line.startswith(b"data: {") and json.loads(line[6:]).get("delta", {}).get("result") == "first line\n":
                    break
        browser.get(base + "/console#/interactions/" + streaming["id"])
        browser.refresh()
        wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, ".live-step pre.live-output"), "first line"))
        live_card = browser.find_element(By.CSS_SELECTOR, ".live-step")
        check("timeline: a running call's output is shown while it runs",
              "first line" in live_card.text and "released" not in live_card.text, live_card.text)
        check("timeline: a running mark while it runs", browser.find_element(By.ID, "t-running").is_displayed()
              and live_card.find_element(By.CSS_SELECTOR, ".running").is_displayed())
        browser.save_screenshot(os.path.join(shots, "running.png"))
        open(os.path.join(data, "d", "environments", stream_env, "root", "workspace", "go"), "w").close()
        wait.until(ec.text_to_be_present_in_element((By.ID, "t-meta"), "completed"))
        shown = [p.text.strip() for p in browser.find_elements(By.CSS_SELECTOR, ".step pre")]
        check("timeline: the call's whole result once it ends", "first line\nreleased" in shown, shown)
        check("timeline: the running mark goes away when it ends",
              not browser.find_elements(By.CSS_SELECTOR, "#t-running, .running, .live-step"))
        # An environment's page lists its interactions, as links (#31 item 5).
        browser.get(base + "/console#/environments/" + stream_env)
        browser.refresh()
        ran = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f'#e-interactions tr[data-id="{streaming["id"]}"]')))
        check("environments: an environment lists its interactions, and only its own",
              [r.get_attribute("data-id") for r in browser.find_elements(By.CSS_SELECTOR, "#e-interactions tr")] == [streaming["id"]]
              and "completed" in ran.text, ran.text)
        ran.find_element(By.CSS_SELECTOR, "a").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "t-title"), streaming["id"]))
        env_link = browser.find_element(By.CSS_SELECTOR, f'#t-links a[href="#/environments/{stream_env}"]')
        env_link.click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "e-title"), stream_env))
        check("timeline: the environment id is a link to the environment", browser.current_url.endswith("#/environments/" + stream_env))
        # Files can be opened (as text, bounded) and downloaded (#31 item 5).
        page_html = '<img src=x onerror="window.__pwned2=1"><b>hello</b>\n'
        big = "".join(f"{i:07d}\n" for i in range(40000))  # 320000 bytes
        files_env = post("/v1beta/environments", {"sources": [
            {"type": "inline", "target": "workspace/page.html", "content": page_html},
            {"type": "inline", "target": "workspace/big.log", "content": big}]})["id"]
        browser.get(base + "/console#/environments/" + files_env)
        browser.refresh()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, '#e-files li[data-path="/workspace/page.html"] .open-file'))).click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "e-file-view"), "hello"))
        check("files: a file opens as text, markup shown, not run",
              browser.find_element(By.ID, "e-file-view").text == page_html.strip()
              and browser.execute_script("return window.__pwned2 === undefined"), browser.find_element(By.ID, "e-file-view").text)
        browser.save_screenshot(os.path.join(shots, "file.png"))
        browser.find_element(By.CSS_SELECTOR, '#e-files li[data-path="/workspace/big.log"] .open-file').click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "e-file-note"), "the first"))
        shown_len = browser.execute_script("return document.getElementById('e-file-view').textContent.length")
        check("files: a big file is shown up to 256 KiB, and says so", shown_len == 256 * 1024
              and "of 320000 bytes" in browser.find_element(By.ID, "e-file-note").text, (shown_len, browser.find_element(By.ID, "e-file-note").text))
        browser.find_element(By.CSS_SELECTOR, '#e-files li[data-path="/workspace/page.html"] a.download-file').click()
        saved = os.path.join(downloads, "page.html")
        WebDriverWait(None, 30, poll_frequency=0.2).until(lambda _: os.path.exists(saved) and open(saved).read() == page_html)
        check("files: download saves the file's bytes under its name", open(saved).read() == page_html)
        media_url = base + f"/v1beta/environments/{files_env}/files/workspace/page.html?alt=media"
        with urllib.request.urlopen(urllib.request.Request(media_url, headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})) as r:
            headers = r.headers
        check("files: a link to a file only downloads it (attachment, octet-stream, nosniff)",
              headers["Content-Disposition"].startswith('attachment; filename="page.html"')
              and headers["Content-Type"] == "application/octet-stream" and headers["X-Content-Type-Options"] == "nosniff", dict(headers))
        for name, extra in (("another origin's fetch", {"Origin": "http://evil.example"}),
                            ("a cross-site <img> or <script>", {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"})):
            try:
                urllib.request.urlopen(urllib.request.Request(media_url, headers=extra))
                check(f"files: {name} cannot read a file", False, "answered 200")
            except urllib.error.HTTPError as e:
                check(f"files: {name} cannot read a file", e.code == 403, e.code)
        # The page puts what it shows in as text: a hostile step cannot run script.
        browser.get(base + "/console#/interactions/" + hostile["id"])
        browser.refresh()
        shown = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".step pre")))
        check("console: markup in data is shown as text", "<img src=x" in shown.text, shown.text)
        check("console: no script ran from data", browser.execute_script("return window.__pwned === undefined"))
        # An expired environment shows its status, and why its files are not there.
        gone = post("/v1beta/environments", {"sources": [
            {"type": "inline", "target": "workspace/old.txt", "content": "old"}]}, at=expiring_base)["id"]
        WebDriverWait(None, 30, poll_frequency=0.2).until(
            lambda _: get("/v1beta/environments/" + gone, at=expiring_base)["status"] == "expired")
        browser.get(expiring_base + "/console")
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#list")))
        browser.get(expiring_base + "/console#/environments")
        browser.refresh()
        gone_row = wait.until(ec.presence_of_element_located((By.XPATH, f'//tbody[@id="envs"]/tr[td="{gone}"]')))
        check("environments: an expired one shows its status", gone_row.get_attribute("data-status") == "expired"
              and "expired" in gone_row.text, gone_row.text)
        gone_row.click()
        why = wait.until(ec.presence_of_element_located((By.ID, "e-error")))
        check("environments: an expired one says when it expired", "expired at" in why.text and gone in why.text, why.text)
        # Triggers with their executions, and webhooks with their deliveries.
        trig = post("/v1beta/triggers", {"interaction": {"agent": agent, "input": "run `true`", "environment": env},
                                         "schedule": "0 0 1 1 *", "time_zone": "UTC", "display_name": "yearly <b>x</b>"})
        execution = post("/v1beta/triggers/" + trig["id"] + "/executions", {})
        WebDriverWait(None, 60, poll_frequency=0.2).until(lambda _: any(
            x["status"] == "completed" for x in get("/v1beta/triggers/" + trig["id"] + "/executions")["trigger_executions"]))
        browser.get(base + "/console#/triggers")
        browser.refresh()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f'#trigger-list tr[data-id="{trig["id"]}"]'))).click()
        ran = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f'#executions tr[data-id="{execution["id"]}"]')))
        check("triggers: an execution with its status and interaction",
              ran.get_attribute("data-status") == "completed" and execution["interaction_id"] in ran.text, ran.text)
        check("triggers: the name is shown as text", "yearly <b>x</b>" in browser.find_element(By.ID, "trigger-list").text)
        browser.save_screenshot(os.path.join(shots, "triggers.png"))
        hook = post("/v1beta/webhooks", {"uri": "http://blocked.example:9/hook", "subscribed_events": ["interaction.completed"]})
        post("/v1beta/webhooks/" + hook["id"] + ":ping", {})
        WebDriverWait(None, 60, poll_frequency=0.2).until(lambda _: any(
            d["attempts"] >= 1 for d in get("/v1beta/webhooks/" + hook["id"] + "/deliveries")["deliveries"]))
        browser.get(base + "/console#/webhooks")
        browser.refresh()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f'#webhook-list tr[data-id="{hook["id"]}"]'))).click()
        delivery = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#deliveries tr")))
        check("webhooks: a delivery with its attempts and why it failed",
              "webhook.ping" in delivery.text and "SSRF" in delivery.text, delivery.text)
        browser.save_screenshot(os.path.join(shots, "webhooks.png"))
        # Approvals: calls a hook asked a person about, approved and denied with the buttons.
        ask_hooks = json.dumps({"review": {"pre_tool_execution": [{"matcher": "code_execution", "hooks": [
            {"type": "command", "command": "python3 /.agents/ask.py", "timeout": 30}]}]}})
        ask_py = ("import json, sys\ncall = json.load(sys.stdin)['tool_call']\n"
                  "print(json.dumps({'decision': 'ask', 'reason': 'deploys need a person'}"
                  " if 'deploy' in call['args'].get('code', '') else {'decision': 'allow'}))\n")
        ask_env = post("/v1beta/environments", {"sources": [
            {"type": "inline", "target": ".agents/hooks.json", "content": ask_hooks},
            {"type": "inline", "target": ".agents/ask.py", "content": ask_py}]})["id"]
        # The call to approve runs under an agent whose base_environment is a spec (a new
        # environment for each new interaction) and with an MCP server whose header the
        # interaction echoes `[redacted]`: Approve must still run it where it was paused.
        post("/v1beta/agents", {"id": "console-based", "base_environment": {"type": "remote", "sources": [
            {"type": "inline", "target": "workspace/elsewhere.txt", "content": "x"}]}})
        to_approve = post("/v1beta/interactions", {"agent": "console-based", "environment": ask_env,
                                                    "input": "run `echo ok > /workspace/approved.txt # deploy`",
                                                    "tools": [{"type": "mcp_server", "name": "docs", "url": "http://mcp.invalid/mcp",
                                                               "headers": {"Authorization": "Bearer not-echoed"}}]})
        to_deny = post("/v1beta/interactions", {"agent": agent, "environment": ask_env,
                                                 "input": "run `echo no > /workspace/denied.txt # deploy`"})
        # One answered through the API by a continuation that is not stored (store: false).
        answered = post("/v1beta/interactions", {"agent": agent, "environment": ask_env,
                                                  "input": "run `echo api > /workspace/api.txt # deploy`"})
        check("approvals: three calls wait", to_approve["status"] == to_deny["status"] == answered["status"] == "requires_action",
              (to_approve["status"], to_deny["status"], answered["status"]))
        request = next(x for x in answered["steps"] if x["type"] == "function_call" and x["name"] == "hookbox_approval")
        post("/v1beta/interactions", {"agent": agent, "previous_interaction_id": answered["id"], "store": False,
                                      "input": [{"type": "function_result", "call_id": request["id"], "result": {"approved": True}}]})
        try:
            pending = get("/v1beta/approvals")["approvals"]
        except urllib.error.HTTPError as e:  # a server without the listing: the check fails
            pending = str(e)
        check("approvals: the server lists what waits", isinstance(pending, list) and sorted(a["interaction_id"] for a in pending)
              == sorted([to_approve["id"], to_deny["id"]]), pending)
        browser.get(base + "/console#/approvals")
        browser.refresh()
        row = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f'#approval-list tr[data-id="{to_deny["id"]}"]')))
        check("approvals: lists the call, its arguments and the hook's reason",
              "denied.txt" in row.text and "deploys need a person" in row.text, row.text)
        listed = [r.get_attribute("data-id") for r in browser.find_elements(By.CSS_SELECTOR, "#approval-list tr")]
        check("approvals: a call settled by an answer that was not stored is not listed",
              answered["id"] not in listed and sorted(listed) == sorted([to_approve["id"], to_deny["id"]]), listed)
        browser.save_screenshot(os.path.join(shots, "approvals.png"))
        row.find_element(By.CSS_SELECTOR, "input.deny-reason").send_keys("not before the <b>release</b>")
        row.find_element(By.CSS_SELECTOR, "button.deny-button").click()
        wait.until(ec.url_contains("#/interactions/"))
        denied_next = browser.current_url.rsplit("/", 1)[1]
        WebDriverWait(None, 60, poll_frequency=0.2).until(
            lambda _: get("/v1beta/interactions/" + denied_next)["status"] == "completed")
        said = json.dumps(get("/v1beta/interactions/" + denied_next)["steps"])
        check("approvals: deny tells the model the reviewer's reason",
              "Denied by a reviewer: not before the <b>release</b>" in said, said)
        browser.get(base + "/console#/approvals")
        browser.refresh()
        row = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f'#approval-list tr[data-id="{to_approve["id"]}"]')))
        check("approvals: a settled call is no longer listed",
              not browser.find_elements(By.CSS_SELECTOR, f'#approval-list tr[data-id="{to_deny["id"]}"]'))
        row.find_element(By.CSS_SELECTOR, "button.approve").click()
        wait.until(ec.url_contains("#/interactions/"))
        approved_next = browser.current_url.rsplit("/", 1)[1]
        WebDriverWait(None, 60, poll_frequency=0.2).until(
            lambda _: get("/v1beta/interactions/" + approved_next)["status"] == "completed")
        files = json.dumps(get("/v1beta/environments/" + ask_env + "/files/workspace?recursive=true"))
        check("approvals: approve runs the call, deny does not",
              "approved.txt" in files and "denied.txt" not in files, files)
        check("approvals: approve ran the call where it was paused, not in the agent's base_environment",
              get("/v1beta/interactions/" + approved_next)["environment_id"] == ask_env)
        browser.get(base + "/console#/approvals")
        browser.refresh()
        wait.until(ec.visibility_of_element_located((By.ID, "approvals-empty")))
        check("approvals: nothing waits once both are answered",
              not browser.find_elements(By.CSS_SELECTOR, "#approval-list tr"))
        # A paused ask is a readable card on the timeline, answered there (#31 item 5).
        in_place = post("/v1beta/interactions", {"agent": agent, "environment": ask_env,
                                                  "input": "run `echo here > /workspace/in-place.txt # deploy`"})
        browser.get(base + "/console#/interactions/" + in_place["id"])
        browser.refresh()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".approval-card button.approve")))
        card = browser.find_element(By.CSS_SELECTOR, ".approval-card")
        check("timeline: a paused ask is a card with the tool, arguments, reason and environment",
              card.find_element(By.CSS_SELECTOR, ".approval-tool").text == "code_execution"
              and "in-place.txt" in card.find_element(By.CSS_SELECTOR, ".approval-args").text
              and card.find_element(By.CSS_SELECTOR, ".reason").text == "deploys need a person"
              and card.find_element(By.CSS_SELECTOR, f'.approval-env a[href="#/environments/{ask_env}"]')
              and "hookbox_approval" not in card.text, card.text)
        browser.save_screenshot(os.path.join(shots, "ask-in-place.png"))
        card.find_element(By.CSS_SELECTOR, "button.approve").click()
        wait.until(lambda b: "#/interactions/" in b.current_url and not b.current_url.endswith(in_place["id"]))
        continuation = browser.current_url.rsplit("/", 1)[1]
        wait.until(ec.text_to_be_present_in_element((By.ID, "t-meta"), "completed"))
        back = browser.find_element(By.CSS_SELECTOR, "#t-links a.previous")
        check("timeline: answering shows the continuation, linked to what it continued",
              browser.find_element(By.ID, "t-title").text == continuation and back.text == in_place["id"], back.text)
        check("timeline: the approved call ran", "in-place.txt" in json.dumps(
            get("/v1beta/environments/" + ask_env + "/files/workspace?recursive=true")))
        back.click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "t-title"), in_place["id"]))
        settled = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".approval-card[data-state]")))
        check("timeline: the answered ask says so, without buttons", settled.get_attribute("data-state") == "approved"
              and not settled.find_elements(By.CSS_SELECTOR, "button"), settled.text)
        forward = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#t-links a.continuation")))
        check("timeline: an interaction links to its continuation", forward.text == continuation, forward.text)
        # The kernel the sandbox runs on is the runtime asked for (HOOKBOX_RUNTIME, as hookbox reads).
        kernel = post("/v1beta/interactions", {"agent": agent, "input": "run `dmesg 2>&1 | head -1`", "environment": env})
        gvisor = os.environ.get("HOOKBOX_RUNTIME", "namespaces") == "gvisor"
        check(f"console: runs on the {'gVisor' if gvisor else 'host'} kernel",
              ("Starting gVisor" in json.dumps(kernel)) == gvisor, kernel)
    finally:
        browser.quit()
finally:
    for proc in (server, expiring):
        proc.kill()
        proc.wait()

passed = sum(ok for _, ok in results)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if passed == len(results) else 1)
