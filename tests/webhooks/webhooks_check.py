"""Webhooks through the unmodified google-genai SDK against a real `hookbox serve`, with a real
receiver on 127.0.0.1 that verifies every delivery with the Standard Webhooks reference library
(`standardwebhooks` from PyPI), not with hookbox's own code.

1. create (bad uri, unknown event refused), get/list show the secret truncated only;
2. interaction.completed arrives signed with the secret from create;
3. kill -9 with a delivery pending (the receiver answered 503): after the restart it arrives,
   with the same webhook-id; the interaction the kill interrupted arrives as interaction.failed;
4. rotation: during the overlap a ping verifies with the old and with the new secret; after an
   immediate rotation only the newest verifies;
5. a literal address the SSRF guard blocks (127.0.0.2, outside the admitted 127.0.0.1/32) is
   refused at create; a name resolving to it (where a live receiver listens, which records what
   reaches it) fails at delivery, and after
   --webhook-disable-after failures the webhook is disabled_due_to_failed_deliveries;
   https is verified: a receiver whose test CA --egress-extra-ca names gets its delivery, the
   same receiver by an address its certificate does not name does not;
6. update, delete, another project's webhook is a 404; metrics count deliveries.

argv: HOOKBOX_BIN DATA_DIR. Ends with `N passed, M failed`.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google import genai
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

warnings.simplefilter("ignore")
hookbox, data = sys.argv[1], sys.argv[2]
AGENT = "antigravity-preview-09-2026"
KEYS = "team-a:key-a,team-b:key-b"
results = []


def check(name, ok, detail=""):
    results.append((name, bool(ok)))
    print(("ok  " if ok else "FAIL") + " " + name + ("" if ok else f": {detail}"))


class Receiver:
    """Records every request; answers `status` (200 until told otherwise). On `host` (another
    loopback address is a receiver a policy must refuse: a broken one would reach it)."""

    def __init__(self, host="127.0.0.1"):
        self.status = 200
        self.seen = []  # (headers dict, body bytes, status answered)
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                with receiver.cond:
                    status = receiver.status
                    receiver.seen.append(({k.lower(): v for k, v in self.headers.items()}, body, status))
                    receiver.cond.notify_all()
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]
        self.url = f"http://{host}:{self.port}/hook"

    def wait_for(self, pred, timeout=60):
        """The first recorded request (headers, body, status) for which pred holds."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for item in self.seen:
                    if pred(item):
                        return item
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)


def event(item):
    return json.loads(item[1]) if item else {}


def verifies(secret, item):
    try:
        Webhook(secret).verify(item[1], item[0])
        return True
    except WebhookVerificationError:
        return False


def serve(data_dir, *extra):
    """A `hookbox serve` on a free loopback port; (process, base URL) once its banner is out."""
    proc = subprocess.Popen(
        [hookbox, "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir,
         "--egress-allow-cidr", "127.0.0.1/32", *extra],
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


def raw(base, method, path, key="key-a"):
    req = urllib.request.Request(base + path, method=method, headers={"x-goog-api-key": key})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


receiver = Receiver()
main_dir = os.path.join(data, "main")
server, base = serve(main_dir, "--webhook-retry-base", "2")
try:
    c = client(base)
    # 1. create and show.
    expect_error("create: an ftp uri is refused naming the field",
                 lambda: c.webhooks.create(uri="ftp://x/", subscribed_events=["interaction.completed"]), 400, "uri")
    expect_error("create: an unknown event is refused naming it",
                 lambda: c.webhooks.create(uri=receiver.url, subscribed_events=["interaction.done"]), 400,
                 "subscribed_events[0]")
    wh = c.webhooks.create(uri=receiver.url, name="ci", subscribed_events=["interaction.completed", "interaction.failed"])
    secret = wh.new_signing_secret
    check("create: a whsec_ secret, shown once", bool(secret) and secret.startswith("whsec_"), secret)
    got = c.webhooks.get(id=wh.id)
    check("get: no secret, only its truncated form",
          got.new_signing_secret is None and len(got.signing_secrets) == 1
          and secret not in json.dumps(got.model_dump(mode="json")), got)
    check("get: enabled, with its events", got.state == "enabled" and got.subscribed_events == wh.subscribed_events, got)
    check("list: the webhook", [w.id for w in c.webhooks.list().webhooks] == [wh.id])
    other = client(base, "key-b")
    expect_error("another project: 404", lambda: other.webhooks.get(id=wh.id), 404, wh.id)
    check("another project: lists none of them", other.webhooks.list().webhooks in (None, []))
    expect_error("another project: its ping is a 404", lambda: other.webhooks.ping(id=wh.id), 404, wh.id)

    # 2. interaction.completed, signed.
    done = c.interactions.create(agent=AGENT, input="run `true`", environment={"type": "remote", "sources": []})
    item = receiver.wait_for(lambda i: event(i).get("data", {}).get("interaction_id") == done.id)
    check("completed: delivered", item is not None)
    check("completed: verifies with the secret from create", item is not None and verifies(secret, item), item)
    check("completed: the event names the interaction and its status",
          event(item).get("type") == "interaction.completed" and event(item)["data"]["status"] == "completed", event(item))
    check("completed: webhook-id is the body's id", item is not None and item[0]["webhook-id"] == event(item)["id"])
    check("completed: a wrong secret does not verify", item is not None and not verifies(
        "whsec_" + "A" * 43 + "=", item))

    # interaction.requires_action: a function tool the client runs.
    asks = c.webhooks.create(uri=receiver.url, subscribed_events=["interaction.requires_action"])
    waiting = c.interactions.create(agent=AGENT, input="call `lookup` with `{}`",
                                    tools=[{"type": "function", "name": "lookup"}])
    item = receiver.wait_for(lambda i: event(i).get("type") == "interaction.requires_action"
                             and event(i)["data"]["interaction_id"] == waiting.id)
    check("requires_action: delivered when a function call waits for the client",
          waiting.status == "requires_action" and item is not None and verifies(asks.new_signing_secret, item), item)
    c.webhooks.delete(id=asks.id)

    # 3. kill -9 with a delivery pending.
    receiver.status = 503
    env = done.environment_id
    pending = c.interactions.create(agent=AGENT, input="run `true`", environment=env)
    first = receiver.wait_for(lambda i: event(i).get("data", {}).get("interaction_id") == pending.id)
    check("pending: the first attempt was answered 503", first is not None and first[2] == 503)
    running = c.interactions.create(agent=AGENT, input="run `sleep 120`", environment=env, background=True)
    deadline = time.monotonic() + 60
    while c.interactions.get(id=running.id).status != "in_progress" and time.monotonic() < deadline:
        time.sleep(0.05)
    server.send_signal(signal.SIGKILL)
    server.wait()
    receiver.status = 200
    server, base = serve(main_dir, "--webhook-retry-base", "2")
    c = client(base)
    again = receiver.wait_for(lambda i: i[2] == 200 and event(i).get("data", {}).get("interaction_id") == pending.id)
    check("after kill -9: the pending delivery arrives", again is not None)
    check("after kill -9: with the same webhook-id", again is not None and first is not None
          and again[0]["webhook-id"] == first[0]["webhook-id"], (first and first[0], again and again[0]))
    check("after kill -9: signed", again is not None and verifies(secret, again))
    failed = receiver.wait_for(lambda i: event(i).get("data", {}).get("interaction_id") == running.id)
    check("after kill -9: the interrupted interaction is interaction.failed",
          failed is not None and event(failed)["type"] == "interaction.failed" and verifies(secret, failed), event(failed))

    # 4. rotation.
    rotated = c.webhooks.rotate_signing_secret(id=wh.id)
    new = rotated.secret
    check("rotate: a new secret", bool(new) and new != secret and new.startswith("whsec_"))
    shown = c.webhooks.get(id=wh.id).signing_secrets
    check("rotate: two secrets shown, the old one expiring", len(shown) == 2 and shown[1].expire_time is not None, shown)
    before = len(receiver.seen)
    c.webhooks.ping(id=wh.id)
    ping = receiver.wait_for(lambda i: event(i).get("type") == "webhook.ping" and receiver.seen.index(i) >= before)
    check("ping: signed with both during the overlap", ping is not None and verifies(secret, ping) and verifies(new, ping),
          ping and ping[0].get("webhook-signature"))
    newest = c.webhooks.rotate_signing_secret(id=wh.id, revocation_behavior="revoke_previous_secrets_immediately").secret
    before = len(receiver.seen)
    c.webhooks.ping(id=wh.id)
    ping = receiver.wait_for(lambda i: event(i).get("type") == "webhook.ping" and receiver.seen.index(i) >= before)
    check("rotate immediately: only the newest secret verifies",
          ping is not None and verifies(newest, ping) and not verifies(new, ping) and not verifies(secret, ping))

    # 6. update and delete.
    updated = c.webhooks.update(id=wh.id, name="renamed", state="disabled", update_mask="name,state")
    check("update: renamed and disabled", updated.name == "renamed" and updated.state == "disabled", updated)
    expect_error("update: the automatic state cannot be set",
                 lambda: c.webhooks.update(id=wh.id, state="disabled_due_to_failed_deliveries"), 400, "state")
    c.webhooks.delete(id=wh.id)
    expect_error("delete: then 404", lambda: c.webhooks.get(id=wh.id), 404, wh.id)
finally:
    server.kill()
    server.wait()

# 5. SSRF and disabling, on a server that gives up fast (its metrics on an address of its own);
# https verified, against an HTTPS receiver with a test CA that only --egress-extra-ca names.
metrics_port_probe = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
metrics_port = metrics_port_probe.server_address[1]
metrics_port_probe.server_close()
tls_dir = os.path.join(data, "tls")
os.makedirs(tls_dir)
tls_receiver = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "..", "conformance",
                                                             "telemetry_receiver.py"), tls_dir],
                                stdout=subprocess.PIPE, text=True)
tls_port = int(tls_receiver.stdout.readline())
# A live receiver on the blocked address: were the guard broken, the delivery would reach it.
blocked_receiver = Receiver("127.0.0.2")
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
with direct.open(urllib.request.Request(blocked_receiver.url, data=b"{}", method="POST"), timeout=30) as r:
    control = r.status
check("ssrf control: the receiver on 127.0.0.2 answers a request sent straight to it",
      control == 200 and len(blocked_receiver.seen) == 1, (control, blocked_receiver.seen))
server, base = serve(os.path.join(data, "fast"), "--webhook-retry-base", "0.05", "--webhook-max-attempts", "2",
                     "--webhook-disable-after", "2", "--metrics-listen", f"127.0.0.1:{metrics_port}",
                     "--egress-resolve", f"telemetry.example.com:443=127.0.0.1:{tls_port}",
                     "--egress-resolve", f"blocked.example:9=127.0.0.2:{blocked_receiver.port}",
                     "--egress-extra-ca", os.path.join(tls_dir, "ca.pem"))
try:
    c = client(base)
    expect_error("ssrf: a literal blocked address is refused at create",
                 lambda: c.webhooks.create(uri="http://127.0.0.2:9/hook", subscribed_events=["interaction.failed"]),
                 400, "SSRF guard")
    expect_error("ssrf: so is localhost", lambda: c.webhooks.create(uri="http://localhost:9/hook",
                                                                    subscribed_events=["interaction.failed"]), 400, "SSRF guard")
    # A name that resolves to a blocked address (pinned, as DNS would) is refused at delivery.
    blocked = c.webhooks.create(uri="http://blocked.example:9/hook", subscribed_events=["interaction.failed"])
    c.webhooks.ping(id=blocked.id)
    deadline = time.monotonic() + 60
    state = None
    while time.monotonic() < deadline:
        state = c.webhooks.get(id=blocked.id).state
        if state != "enabled":
            break
        time.sleep(0.05)
    check("ssrf: refused until the webhook is disabled_due_to_failed_deliveries",
          state == "disabled_due_to_failed_deliveries", state)
    deliveries = raw(base, "GET", f"/v1beta/webhooks/{blocked.id}/deliveries")["deliveries"]
    check("ssrf: the delivery failed, saying the guard refused it",
          len(deliveries) == 1 and deliveries[0]["status"] == "failed" and deliveries[0]["attempts"] == 2
          and "SSRF" in deliveries[0].get("last_error", ""), deliveries)
    # The owner is told the rule, not what the name resolves to (issue 36): the operator's
    # audit log keeps that.
    last_error = deliveries[0].get("last_error", "") if deliveries else ""
    check("ssrf: the error names the rule, never the address the name resolves to",
          "blocked range (loopback)" in last_error and "127.0.0" not in last_error, last_error)
    check("ssrf: nothing reached the receiver from it",
          not any(event(i).get("data", {}).get("webhook_id") == blocked.id for i in receiver.seen)
          and len(blocked_receiver.seen) == 1, blocked_receiver.seen)
    ok = c.webhooks.create(uri=receiver.url, subscribed_events=["interaction.completed"])
    c.webhooks.ping(id=ok.id)
    got = receiver.wait_for(lambda i: event(i).get("data", {}).get("webhook_id") == ok.id)
    check("ping: delivered to an admitted receiver", got is not None and verifies(ok.new_signing_secret, got))
    secure = c.webhooks.create(uri="https://telemetry.example.com/hooks", subscribed_events=["interaction.completed"])
    c.webhooks.ping(id=secure.id)
    events_file = os.path.join(tls_dir, "events.jsonl")

    def tls_delivery():
        if not os.path.exists(events_file):
            return None
        with open(events_file) as f:
            return next((json.loads(l) for l in f if secure.id in l), None)
    got = None
    deadline = time.monotonic() + 60
    while got is None and time.monotonic() < deadline:
        got = tls_delivery()
        time.sleep(0.05)
    headers = {k.lower(): v for k, v in (got or {}).get("headers", {}).items()}
    check("https: delivered to a receiver whose CA --egress-extra-ca names",
          got is not None and got["path"] == "/hooks" and headers.get("webhook-signature", "").startswith("v1,"), got)
    # The same receiver by its address: its certificate does not name it.
    mismatch = c.webhooks.create(uri=f"https://127.0.0.1:{tls_port}/hooks", subscribed_events=["interaction.completed"])
    c.webhooks.ping(id=mismatch.id)
    failed = None
    deadline = time.monotonic() + 60
    while failed is None and time.monotonic() < deadline:
        listed = raw(base, "GET", f"/v1beta/webhooks/{mismatch.id}/deliveries")["deliveries"]
        failed = next((d for d in listed if d["status"] == "failed"), None)
        time.sleep(0.05)
    check("https: a certificate that does not name the host fails the delivery",
          failed is not None and "TLS" in (failed.get("last_error") or ""), failed)
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30).read().decode()
    lines = [l for l in text.splitlines() if l.startswith("hookbox_webhook_deliveries_total")]
    count = lambda outcome: sum(float(l.split()[-1]) for l in lines if f'outcome="{outcome}"' in l)
    check("metrics: deliveries counted by outcome",
          count("delivered") >= 1 and count("retrying") >= 1 and count("gave_up") >= 1, lines)
finally:
    server.kill()
    server.wait()
    tls_receiver.kill()
    tls_receiver.wait()

passed = sum(ok for _, ok in results)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if passed == len(results) else 1)
