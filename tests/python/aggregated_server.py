"""A tiny third-party aggregated API server, for the aggregation tests.

It serves `wardle.example.com/v1` `flunders` over HTTPS, trusts only clients
presenting a certificate from the front-proxy CA (as a real aggregated
server must), and answers with what it saw of the request, so the test can
check the identity headers and the client certificate the aggregator sent.
A watch streams one event per second; the flunder `slow` never comes. It also keeps `gizmos` (create, get,
list, delete, deletecollection) and `doodads` (the same without
deletecollection) in memory, so namespace deletion has something to empty.

Usage: aggregated_server.py PORT CERT KEY FRONT_PROXY_CA
"""

import json
import ssl
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GV = "wardle.example.com/v1"
RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": GV,
    "resources": [
        {"name": "flunders", "singularName": "flunder", "namespaced": True, "kind": "Flunder",
         "verbs": ["get", "list", "watch"], "shortNames": ["fl"]},
        {"name": "gizmos", "singularName": "gizmo", "namespaced": True, "kind": "Gizmo",
         "verbs": ["create", "delete", "deletecollection", "get", "list"]},
        {"name": "doodads", "singularName": "doodad", "namespaced": True, "kind": "Doodad",
         "verbs": ["create", "delete", "get", "list"]},
    ],
}
KEPT = {"gizmos": "Gizmo", "doodads": "Doodad"}
# (resource, namespace) -> name -> object
STORE = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("aggregated-server: " + (fmt % args) + "\n")

    def seen(self):
        cert = self.connection.getpeercert() or {}
        subject = dict(x[0] for x in cert.get("subject", ()))
        extra = {k[len("X-Remote-Extra-"):]: v for k, v in self.headers.items() if k.lower().startswith("x-remote-extra-")}
        return {
            "user": self.headers.get_all("X-Remote-User") or [],
            "groups": self.headers.get_all("X-Remote-Group") or [],
            "extra": extra,
            "authorization": self.headers.get("Authorization"),
            "clientCN": subject.get("commonName"),
        }

    def send_json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def gizmo_path(self):
        """((resource, namespace), name or None) of a kept resource's path, else None."""
        parts = self.path.partition("?")[0].strip("/").split("/")
        if len(parts) in (6, 7) and parts[:3] == ["apis", "wardle.example.com", "v1"] and parts[5] in KEPT:
            return (parts[5], parts[4]), (parts[6] if len(parts) == 7 else None)
        return None

    def not_found(self):
        self.send_json(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "reason": "NotFound", "code": 404, "message": "not found"})

    def gizmo_list(self, where):
        return {"apiVersion": GV, "kind": KEPT[where[0]] + "List", "metadata": {"resourceVersion": "1"},
                "items": list(STORE.get(where, {}).values())}

    def do_POST(self):
        target = self.gizmo_path()
        if target is None or target[1] is not None:
            return self.not_found()
        obj = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        obj["metadata"]["namespace"] = target[0][1]
        obj["metadata"]["resourceVersion"] = "1"
        STORE.setdefault(target[0], {})[obj["metadata"]["name"]] = obj
        self.send_json(201, obj)

    def do_DELETE(self):
        target = self.gizmo_path()
        if target is None:
            return self.not_found()
        where, name = target
        if name is None:
            if where[0] == "doodads":
                return self.send_json(405, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                            "reason": "MethodNotAllowed", "code": 405, "message": "no deletecollection"})
            listed = self.gizmo_list(where)
            STORE.pop(where, None)
            return self.send_json(200, listed)
        obj = STORE.get(where, {}).pop(name, None)
        return self.send_json(200, obj) if obj else self.not_found()

    def do_GET(self):
        target = self.gizmo_path()
        if target is not None:
            where, name = target
            if name is None:
                return self.send_json(200, self.gizmo_list(where))
            obj = STORE.get(where, {}).get(name)
            return self.send_json(200, obj) if obj else self.not_found()
        path, _, query = self.path.partition("?")
        if path in ("/healthz", "/readyz", "/livez"):
            return self.send_json(200, "ok")
        if path == "/apis":
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": "wardle.example.com", "versions": [{"groupVersion": GV, "version": "v1"}],
                 "preferredVersion": {"groupVersion": GV, "version": "v1"}}]})
        if path == "/apis/wardle.example.com/v1":
            return self.send_json(200, RESOURCES)
        parts = path.strip("/").split("/")
        if len(parts) >= 6 and parts[:3] == ["apis", "wardle.example.com", "v1"] and parts[5] == "flunders":
            namespace = parts[4]
            item = {"apiVersion": GV, "kind": "Flunder",
                    "metadata": {"name": "echo", "namespace": namespace, "resourceVersion": "1"},
                    "spec": self.seen()}
            if "watch=true" in query or "watch=1" in query:
                return self.watch(item)
            if len(parts) == 7 and parts[6] == "slow":
                time.sleep(3600)  # a backend that takes the connection and never answers
            if len(parts) == 7:
                return self.send_json(200, item)
            return self.send_json(200, {"apiVersion": GV, "kind": "FlunderList",
                                        "metadata": {"resourceVersion": "1"}, "items": [item]})
        self.send_json(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "reason": "NotFound", "code": 404, "message": "not found"})

    def watch(self, item):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(3):
            event = dict(item)
            event["metadata"] = dict(item["metadata"], name=f"event-{i}", annotations={"sentAt": repr(time.time())})
            line = (json.dumps({"type": "ADDED", "object": event}) + "\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()
            time.sleep(1)
        self.wfile.write(b"0\r\n\r\n")


def main():
    port, cert, key, ca = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.load_verify_locations(ca)
    context.verify_mode = ssl.CERT_REQUIRED
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
