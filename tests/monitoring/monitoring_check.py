"""Checks packaging/monitoring/ with promtool and against a real `hookbox serve`'s /metrics.

Usage: monitoring_check.py HOOKBOX_BIN MONITORING_DIR SCRATCH_DIR
"""

import json
import os
import re
import subprocess
import sys
import urllib.request

hookbox, mon, scratch = sys.argv[1:4]
rules = os.path.join(mon, "hookbox-alerts.yml")
dashboard_path = os.path.join(mon, "grafana-dashboard.json")
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name}: {detail}")


def promtool(*args):
    p = subprocess.run(["promtool", *args], cwd=mon, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


rc, out = promtool("check", "rules", rules)
check("promtool check rules hookbox-alerts.yml", rc == 0, out)
rc, out = promtool("test", "rules", "hookbox-alerts.test.yml")
check("promtool test rules: every alert fires from its synthetic series, and only then", rc == 0, out)

# Every alert in the rules has a unit test that expects it to fire.
alerts = re.findall(r"^\s*- alert: (\w+)", open(rules).read(), re.M)
tests = open(os.path.join(mon, "hookbox-alerts.test.yml")).read()
fired = set()
for block in re.split(r"\n\s*- eval_time:", tests)[1:]:
    m = re.search(r"alertname: (\w+)", block)
    if m and "exp_labels" in block:
        fired.add(m.group(1))
check("every alert has a test that fires it", set(alerts) <= fired and alerts, sorted(set(alerts) - fired))

dashboard = json.load(open(dashboard_path))
exprs = []
for panel in dashboard["panels"]:
    for target in panel.get("targets", []):
        exprs.append((panel["title"], target["expr"]))
check("the dashboard has panels with queries", len(exprs) >= 10, len(exprs))
check("every panel has a unique id", len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"]))
# promtool parses PromQL in rule files: each expression as a recording rule.
subst = {"$__range": "1h", "$__rate_interval": "5m", "$group": ".*"}
lines = ["groups:", "  - name: dashboard", "    rules:"]
for i, (_, expr) in enumerate(exprs):
    for k, v in subst.items():
        expr = expr.replace(k, v)
    lines.append(f"      - record: dashboard:query_{i}")
    lines.append("        expr: " + json.dumps(expr))
dash_rules = os.path.join(scratch, "dashboard-queries.yml")
open(dash_rules, "w").write("\n".join(lines) + "\n")
rc, out = promtool("check", "rules", dash_rules)
check("every dashboard query is valid PromQL", rc == 0, out)

# What a real server exports: OpenMetrics `# TYPE` lines name every family, samples or not.
proc = subprocess.Popen(
    [hookbox, "serve", "--listen", "127.0.0.1:0", "--data-dir", os.path.join(scratch, "data")],
    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
)
try:
    base = None
    for line in proc.stdout:
        if line.startswith("hookbox is listening on http://"):
            base = re.search(r"http://[^\s/]+", line).group(0)
            break
    if base is None:
        sys.exit("monitoring: hookbox serve exited before listening")
    text = urllib.request.urlopen(base + "/metrics", timeout=30).read().decode()
finally:
    proc.terminate()
    proc.wait(timeout=30)
exported = set()
for kind_name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
    if kind == "counter":
        exported.add(kind_name + "_total")
    elif kind == "histogram":
        exported.update(kind_name + s for s in ("_bucket", "_sum", "_count"))
    else:
        exported.add(kind_name)
check("the server exports hook metrics", "hookbox_hook_handler_runs_total" in exported, sorted(exported))
named = set(re.findall(r"\bhookbox_[a-z_]+", open(rules).read()))
named |= {n for _, e in exprs for n in re.findall(r"\bhookbox_[a-z_]+", e)}
check("every series the rules and dashboard name is exported by hookbox serve", named and named <= exported,
      sorted(named - exported))

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
