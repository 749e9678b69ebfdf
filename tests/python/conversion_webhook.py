"""A CRD conversion webhook for the tests: converts example.com Tokens
between v1 (spec.value) and v2 (spec.data), over TLS.

Usage: conversion_webhook.py PORT CERT KEY
"""

import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def convert(obj, desired):
    spec = dict(obj.get("spec", {}))
    if desired.endswith("/v2") and "value" in spec:
        spec["data"] = spec.pop("value")
    if desired.endswith("/v1") and "data" in spec:
        spec["value"] = spec.pop("data")
    out = dict(obj, apiVersion=desired, spec=spec)
    out.setdefault("metadata", {}).setdefault("annotations", {})["converted-by"] = "webhook"
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("conversion-webhook: " + (fmt % args) + "\n")

    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        converted = [convert(o, request["desiredAPIVersion"]) for o in request["objects"]]
        body = json.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                           "response": {"uid": request["uid"], "convertedObjects": converted,
                                        "result": {"status": "Success"}}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
