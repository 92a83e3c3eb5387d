"""Triggers through the unmodified google-genai SDK against real `hookbox serve` processes.

- create: a bad schedule and an unknown zone are refused naming the field; next_run_time is set;
- run: an execution that links its interaction and completes; pause and resume;
- a trigger whose runs fail is paused (status error) after max_consecutive_failures;
- execution_timeout_seconds times an execution out and cancels its interaction;
- a `* * * * *` trigger fires at real minute boundaries, each minute once; with
  HOOKBOX_TRIGGERS_DATABASE (a fresh PostgreSQL database) on two replicas sharing it.

argv: HOOKBOX_BIN DATA_DIR. Ends with `N passed, M failed`.
"""

import datetime
import json
import os
import subprocess
import sys
import time
import warnings

from google import genai

warnings.simplefilter("ignore")
hookbox, data = sys.argv[1], sys.argv[2]
AGENT = "antigravity-preview-09-2026"
KEYS = "team-a:key-a,team-b:key-b"
results = []


def check(name, ok, detail=""):
    results.append((name, bool(ok)))
    print(("ok  " if ok else "FAIL") + " " + name + ("" if ok else f": {detail}"))


def serve(data_dir, *extra):
    proc = subprocess.Popen(
        [hookbox, "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**{k: v for k, v in os.environ.items() if k != "GEMINI_API_KEY"}, "HOOKBOX_API_KEYS": KEYS},
    )
    url = None
    for line in proc.stdout:
        if line.startswith("hookbox is listening on http://"):
            url = line.split()[4]
        if line.startswith("or set "):
            break
    return proc, url


def client(base, key="key-a"):
    return genai.Client(api_key=key, http_options={"base_url": base, "api_version": "v1beta"})


def expect_error(name, fn, status, needle):
    try:
        fn()
    except Exception as e:
        text = str(e)
        check(name, str(status) in text and needle in text, text)
        return
    check(name, False, "no exception")


def until(pred, timeout=60):
    """pred() once it is truthy, polling; None after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.1)
    return None


def executions(c, trigger_id):
    return c.triggers.list_executions(trigger_id=trigger_id).trigger_executions or []


def interaction(text):
    return {"agent": AGENT, "input": text, "environment": {"type": "remote", "sources": []}}


procs = []
try:
    server, base = serve(os.path.join(data, "one"))
    procs.append(server)
    c = client(base)
    expect_error("create: a bad schedule is refused naming it",
                 lambda: c.triggers.create(interaction=interaction("run `true`"), schedule="every day", time_zone="UTC"),
                 400, "schedule")
    expect_error("create: an unknown zone is refused naming it",
                 lambda: c.triggers.create(interaction=interaction("run `true`"), schedule="0 9 * * *", time_zone="Mars/Olympus"),
                 400, "time_zone")
    t = c.triggers.create(interaction=interaction("run `echo scheduled`"), schedule="0 9 * * 1-5",
                          time_zone="Europe/Berlin", display_name="weekday mornings")
    nxt = t.next_run_time
    check("create: active with a next run at 09:00 Berlin on a weekday",
          t.status == "active" and nxt is not None and nxt.weekday() < 5 and nxt.minute == 0
          and nxt.astimezone(datetime.timezone.utc).hour in (7, 8), (t.status, nxt))
    other = client(base, "key-b")
    expect_error("another project: 404", lambda: other.triggers.get(id=t.id), 404, t.id)

    ran = c.triggers.run(trigger_id=t.id)
    check("run: an execution with its interaction", ran.status == "in_progress" and bool(ran.interaction_id), ran)
    done = until(lambda: next((e for e in executions(c, t.id) if e.status == "completed"), None))
    check("run: the execution completes with its interaction", done is not None and done.interaction_id == ran.interaction_id, done)
    got = c.interactions.get(id=ran.interaction_id)
    check("run: the interaction ran the trigger's input", got.status == "completed" and "scheduled" in (got.output_text or ""),
          got.output_text)
    t = c.triggers.get(id=t.id)
    check("run: the trigger names its last interaction and run", t.previous_interaction_id == ran.interaction_id
          and t.last_run_time is not None, t)
    paused = c.triggers.update(id=t.id, status="paused")
    check("pause: no next run", paused.status == "paused" and paused.next_run_time is None and paused.last_pause_time, paused)
    resumed = c.triggers.update(id=t.id, status="active")
    check("resume: a next run again", resumed.status == "active" and resumed.next_run_time is not None, resumed)
    expect_error("update: error cannot be set", lambda: c.triggers.update(id=t.id, status="error"), 400, "status")
    check("list: filter by status", [x.id for x in c.triggers.list(filter_="status=active").triggers] == [t.id]
          and not c.triggers.list(filter_="status=paused").triggers)

    # Runs that fail: the environment it names is gone.
    env = c.interactions.create(agent=AGENT, input="run `true`", environment={"type": "remote", "sources": []}).environment_id
    failing = c.triggers.create(interaction={"agent": AGENT, "input": "run `true`"}, schedule="0 0 1 1 *",
                                time_zone="UTC", environment_id=env, max_consecutive_failures=2)
    c.environments.delete(id=env)
    first = c.triggers.run(trigger_id=failing.id)
    check("failing: the run is a failed execution with the reason", first.status == "failed" and env in (first.error or ""), first)
    check("failing: one failure counted, still active",
          c.triggers.get(id=failing.id).consecutive_failure_count == 1 and c.triggers.get(id=failing.id).status == "active")
    c.triggers.run(trigger_id=failing.id)
    f = c.triggers.get(id=failing.id)
    check("failing: paused (status error) at max_consecutive_failures",
          f.status == "error" and f.consecutive_failure_count == 2 and f.next_run_time is None, f)

    # A time-out cancels the interaction.
    slow = c.triggers.create(interaction=interaction("run `sleep 60`"), schedule="0 0 1 1 *", time_zone="UTC",
                             execution_timeout_seconds=1)
    run = c.triggers.run(trigger_id=slow.id)
    timed = until(lambda: next((e for e in executions(c, slow.id) if e.status == "timed_out"), None), 30)
    check("timeout: the execution timed out", timed is not None and "timed out" in (timed.error or ""), timed)
    cancelled = until(lambda: c.interactions.get(id=run.interaction_id).status == "cancelled", 30)
    check("timeout: its interaction was cancelled", cancelled, c.interactions.get(id=run.interaction_id).status)

    # A real minute boundary; on two replicas of one PostgreSQL database when there is one.
    database = os.environ.get("HOOKBOX_TRIGGERS_DATABASE")
    if database:
        shared = os.path.join(data, "shared")
        replica = ["--database", database, "--cluster-secret", "triggers-test-cluster-secret", "--lease-ttl", "2"]
        a, a_base = serve(shared, *replica)
        procs.append(a)
        b, b_base = serve(shared, *replica)
        procs.append(b)
        place, label = client(a_base), "two replicas"
    else:
        place, label = c, "one server"
    minute = place.triggers.create(interaction=interaction("run `true`"), schedule="* * * * *", time_zone="UTC")
    fired = until(lambda: next((e for e in executions(place, minute.id) if e.status == "completed"), None), 75)
    check(f"{label}: fired at a minute boundary",
          fired is not None and fired.scheduled_time is not None and fired.scheduled_time.second == 0, fired)
    if fired is not None:
        # Wait for the next minute's run too: by then every replica has looked at the first one
        # many times. Each minute has exactly one execution.
        two = until(lambda: len([e for e in executions(place, minute.id) if e.status == "completed"]) >= 2, 75)
        runs = [e for e in executions(place, minute.id) if e.status != "skipped"]
        minutes = [e.scheduled_time for e in runs]
        check(f"{label}: each minute fired once, not twice", two and len(minutes) == len(set(minutes)) >= 2,
              [(e.id, e.scheduled_time, e.status) for e in runs])
    place.triggers.delete(id=minute.id)
    expect_error("delete: then 404", lambda: place.triggers.get(id=minute.id), 404, minute.id)
finally:
    for p in procs:
        p.kill()
        p.wait()

passed = sum(ok for _, ok in results)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if passed == len(results) else 1)
