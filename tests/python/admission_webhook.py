"""An admission webhook for the tests, over TLS. By path:

- /validate denies objects whose name has bad- (403, with a warning), allows the rest;
- /mutate adds the label mutated-by=webhook and the annotation first-saw
  (the labels it saw, so a test can tell it was called again after /label);
- /label adds the label second=yes;
- /slow answers after 3 seconds.

Every review received is appended to LOG as a JSON line.

Usage: admission_webhook.py PORT CERT KEY LOG
"""

import base64
import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()


def escape(key):
    return key.replace("~", "~0").replace("/", "~1")


def patch_for(path, obj):
    meta = obj.get("metadata", {})
    labels = meta.get("labels") or {}
    ops = []
    if path == "/mutate":
        if "labels" not in meta:
            ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
        ops.append({"op": "add", "path": "/metadata/labels/mutated-by", "value": "webhook"})
        if "annotations" not in meta:
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        saw = ",".join(sorted(k for k in labels if k != "mutated-by"))
        ops.append({"op": "add", "path": "/metadata/annotations/" + escape("first-saw"), "value": saw})
    if path == "/label" and labels.get("second") != "yes":
        if "labels" not in meta:
            ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
        ops.append({"op": "add", "path": "/metadata/labels/second", "value": "yes"})
    return ops


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("admission-webhook: " + (fmt % args) + "\n")

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        path = self.path.split("?")[0]
        with LOCK:
            with open(self.server.log, "a") as log:
                log.write(json.dumps({"path": self.path, "request": request,
                                      "traceparent": self.headers.get("traceparent")}) + "\n")
        response = {"uid": request["uid"], "allowed": True}
        obj = request.get("object") or request.get("oldObject") or {}
        name = obj.get("metadata", {}).get("name", "")
        if path == "/slow":
            time.sleep(3)
        if path == "/validate":
            response["auditAnnotations"] = {"looked-at": name}
        if path == "/validate" and "bad-" in name:
            response["allowed"] = False
            response["status"] = {"code": 403, "reason": "Forbidden",
                                  "message": "names with bad- are not allowed"}
            response["warnings"] = ["the webhook looked at " + name]
        if path in ("/mutate", "/label"):
            ops = patch_for(path, obj)
            if ops:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
            if path == "/mutate":
                response["warnings"] = ["mutated " + name]
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": response}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    port, cert, key, log = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.log = log
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
