"""An audit webhook for the tests, over TLS: every EventList POSTed to it
is checked (kind, apiVersion) and its events appended to LOG as JSON lines,
with the size of the batch they came in.

Usage: audit_webhook.py PORT CERT KEY LOG
"""

import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("audit-webhook: " + (fmt % args) + "\n")

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ok = (body.get("kind") == "EventList" and body.get("apiVersion") == "audit.k8s.io/v1"
              and self.headers.get("Content-Type", "").startswith("application/json"))
        if ok:
            with LOCK:
                with open(self.server.log, "a") as log:
                    for event in body.get("items", []):
                        log.write(json.dumps({"batch": len(body["items"]), "event": event}) + "\n")
        self.send_response(200 if ok else 400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


def main():
    port, cert, key, log = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.log = log
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
