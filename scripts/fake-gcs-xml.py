#!/usr/bin/env python3
"""The one piece of GCS's XML API that fake-gcs-server lacks, in front of it, for tests.

GCS clients such as `object_store` (hookbox's snapshots and `gcs` sources) write an object with
the XML API's `PUT /BUCKET/OBJECT` (a conditional create adds `x-goog-if-generation-match: 0`)
and read the new object's `ETag` from the answer. fake-gcs-server serves that path for reads and
deletes but not for writes, so this maps such a PUT onto its JSON API's media upload
(`POST /upload/storage/v1/b/BUCKET/o?uploadType=media&name=OBJECT&ifGenerationMatch=N`), where
the server itself decides the precondition, and answers with the `ETag` and `x-goog-generation`
of the object it stored. Every other request is passed through unchanged.

usage: fake-gcs-xml.py LISTEN_PORT BACKEND_PORT   (both on 127.0.0.1; runs until killed)
"""

import http.client
import json
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

listen_port, backend_port = int(sys.argv[1]), int(sys.argv[2])
# Request and answer headers that belong to one hop, not to the exchange.
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
       "proxy-connection", "host", "content-length"}
MAX_BODY = 1 << 30


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def body(self):
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(length) if length else b""

    def forward(self, method, path, body, headers):
        conn = http.client.HTTPConnection("127.0.0.1", backend_port, timeout=120)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        finally:
            conn.close()

    def answer(self, status, headers, body):
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def passthrough(self):
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        # The Host as the client sent it: fake-gcs-server tells XML API paths (`/BUCKET/OBJECT`
        # on its public host, which is this address) from the rest by it.
        headers["Host"] = self.headers.get("host") or f"127.0.0.1:{listen_port}"
        self.answer(*self.forward(self.command, self.path, self.body(), headers))

    def xml_put(self, bucket, name):
        query = {"uploadType": "media", "name": name}
        match = self.headers.get("x-goog-if-generation-match")
        if match is not None:
            query["ifGenerationMatch"] = match
        path = f"/upload/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o?" + urllib.parse.urlencode(query)
        headers = {"Content-Type": self.headers.get("content-type") or "application/octet-stream",
                   "Host": f"127.0.0.1:{listen_port}"}
        status, answer_headers, body = self.forward("POST", path, self.body(), headers)
        if status != 200:
            self.answer(status, answer_headers, body)
            return
        stored = json.loads(body)
        self.answer(200, [("ETag", f'"{stored["etag"]}"'), ("x-goog-generation", stored["generation"])], b"")

    def do_PUT(self):
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.lstrip("/").split("/", 1)
        # An XML API object write: /BUCKET/OBJECT, no query (multipart parts are not served).
        if len(parts) == 2 and parts[1] and not url.query and parts[0] not in ("storage", "upload", "download", "batch", "_internal"):
            self.xml_put(urllib.parse.unquote(parts[0]), urllib.parse.unquote(parts[1]))
        else:
            self.passthrough()

    do_GET = do_HEAD = do_POST = do_DELETE = do_PATCH = passthrough

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", listen_port), Handler).serve_forever()
