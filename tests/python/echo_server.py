"""Answers every request with what it saw, for the proxy tests: the method,
path, query, headers and body as JSON, status 201 for a POST and 200
otherwise, with an `X-Echo: yes` header. `/redirect` answers 302 to
`/elsewhere`.

Usage: echo_server.py PORT  (listens on every address; prints `ready`)
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Echo(BaseHTTPRequestHandler):
    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        path, _, query = self.path.partition("?")
        if path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        seen = {
            "method": self.command,
            "path": path,
            "query": query,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
        }
        out = json.dumps(seen).encode()
        self.send_response(201 if self.command == "POST" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Echo", "yes")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = answer

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), Echo)
print("ready", flush=True)
server.serve_forever()
