#!/usr/bin/env python3
"""Ask kubectl which zero-valued fields Go's JSON keeps; writes proto/k8s/zero_fields.txt.

Why: Go's protobuf marshaller writes every non-pointer field, so a request
body carries `0`, `false` and `""` for fields the client never set, and the
protobuf alone cannot tell them from a pointer field set to zero on purpose
(`replicas: 0`, `storageClassName: ""`). Go's JSON can: it leaves out a zero
`omitempty` value field and keeps a set pointer or a field without
`omitempty`. kubectl is a Go program holding those types, so we ask it.

How: a loopback fake API server answers each `kubectl create <generator> -o
json` (and `kubectl auth whoami -o json`) with an object of the requested kind in which every field, at every
depth, is present with its zero value (encoded from proto/k8s/*.proto), and
kubectl prints that object through Go's JSON. A zero field that shows up in
the output is one Go keeps. The result lists, for each message reached, the
fields kept at zero; src/k8s.rs drops the other zero fields of those
messages, and for messages not listed keeps zero numbers and bools and drops
empty strings.

Run after gen.py, with kubectl 1.31+ (Python 3.11, stdlib only):
`python3 proto/k8s/probe.py`. The kubectl used is $KUBECTL, else the
`kubectl.1.33` beside the Google Cloud SDK dispatcher, else `kubectl`.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "zero_fields.txt"
MAGIC = b"k8s\x00"

# kubectl commands that send a typed object and print the server's answer as JSON.
COMMANDS = [
    ["create", "namespace", "x"],
    ["create", "configmap", "x", "--from-literal=a=b"],
    ["create", "secret", "generic", "x", "--from-literal=a=b"],
    ["create", "serviceaccount", "x"],
    ["create", "deployment", "x", "--image=nginx"],
    ["create", "job", "x", "--image=busybox"],
    ["create", "cronjob", "x", "--image=busybox", "--schedule=* * * * *"],
    ["create", "service", "clusterip", "x", "--tcp=80:8080"],
    ["create", "quota", "x", "--hard=pods=1"],
    ["create", "role", "x", "--verb=get", "--resource=pods"],
    ["create", "rolebinding", "x", "--role=x", "--user=u"],
    ["create", "clusterrole", "x", "--verb=get", "--resource=pods"],
    ["create", "clusterrolebinding", "x", "--clusterrole=x", "--user=u"],
    ["create", "ingress", "x", "--rule=a.com/b=svc:80"],
    ["create", "poddisruptionbudget", "x", "--selector=a=b", "--min-available=1"],
    ["create", "priorityclass", "x", "--value=1"],
    ["auth", "whoami"],
]

# Messages with a JSON form of their own (see src/k8s.rs): encoded minimally, not probed.
SPECIAL = re.compile(
    r"\.(meta\.v1\.(Time|MicroTime|Duration|FieldsV1|Verbs)|resource\.Quantity|intstr\.IntOrString"
    r"|runtime\.(RawExtension|Unknown)|ExtraValue|JSON|JSONSchemaPropsOr\w+)$"
)


@dataclass
class Field:
    label: str  # optional | repeated | map
    type: str  # scalar, or fully-qualified message name
    name: str
    number: int
    json: str


def read_schemas() -> dict[str, list[Field]]:
    """Messages of proto/k8s/*.proto as written by gen.py, by fully-qualified name."""
    messages: dict[str, list[Field]] = {}
    line_re = re.compile(
        r"\s*(?:(optional|repeated) (\S+)|map<string, (\S+)>) (\w+) = (\d+)(?: \[json_name = \"([^\"]*)\"\])?;"
    )
    for path in sorted(HERE.glob("*.proto")):
        package = re.search(r"^package (\S+);", path.read_text(), re.M).group(1)
        current = None
        for line in path.read_text().splitlines():
            if m := re.match(r"message (\w+) \{", line):
                current = messages.setdefault(f"{package}.{m.group(1)}", [])
            elif m := line_re.match(line):
                label, type_ = (m.group(1), m.group(2)) if m.group(1) else ("map", m.group(3))
                name = m.group(4)
                current.append(Field(label, type_.lstrip("."), name, int(m.group(5)), m.group(6) or name))
    return messages


# ------------------------------------------------------------------ protobuf


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def length_delimited(number: int, data: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(data)) + data


def zero(type_: str, number: int, messages, path: tuple[str, ...]) -> bytes | None:
    """One field of `type_` holding its zero value (a message: all of its fields zero)."""
    if type_ in ("int32", "int64", "bool", "uint32", "uint64"):
        return varint(number << 3) + b"\x00"
    if type_ == "double":
        return varint(number << 3 | 1) + bytes(8)
    if type_ in ("string", "bytes"):
        return length_delimited(number, b"")
    if type_ in path:  # a recursive type: stop here
        return None
    return length_delimited(number, zero_message(type_, messages, path + (type_,)))


def zero_message(name: str, messages, path: tuple[str, ...] = ()) -> bytes:
    if name.endswith("resource.Quantity"):
        return length_delimited(1, b"1")  # Go rejects an empty quantity
    if SPECIAL.search(name):
        return b""
    out = b""
    for f in messages[name]:
        if f.label == "map":
            value = zero(f.type, 2, messages, path)
            out += length_delimited(f.number, length_delimited(1, b"k") + (value or b""))
        else:
            out += zero(f.type, f.number, messages, path) or b""
    return out


def read_fields(data: bytes) -> dict[int, bytes]:
    """The length-delimited fields of a message (enough to read a runtime.Unknown)."""
    fields, i = {}, 0
    while i < len(data):
        key, i = read_varint(data, i)
        if key & 7 == 2:
            size, i = read_varint(data, i)
            fields[key >> 3], i = data[i : i + size], i + size
        elif key & 7 == 0:
            _, i = read_varint(data, i)
        else:
            raise ValueError(f"unexpected wire type {key & 7}")
    return fields


def read_varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        byte = data[i]
        n |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not byte & 0x80:
            return n, i


# ------------------------------------------------------------ the fake server


def discovery(path: str):
    resources = {
        "v1": [("namespaces", "Namespace", False), ("pods", "Pod", True)],
        "rbac.authorization.k8s.io/v1": [("roles", "Role", True), ("clusterroles", "ClusterRole", False)],
    }
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"]}
    if path == "/apis":
        groups = [{"name": "rbac.authorization.k8s.io", "versions": [{"groupVersion": "rbac.authorization.k8s.io/v1", "version": "v1"}]}]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
    gv = path.removeprefix("/api/").removeprefix("/apis/")
    if gv in resources:
        items = [{"name": n, "singularName": "", "namespaced": ns, "kind": k, "verbs": ["create", "get"]} for n, k, ns in resources[gv]]
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": items}
    return None


def serve(messages, kinds):
    class Handler(http.server.BaseHTTPRequestHandler):
        def reply(self, code: int, content_type: str, body: bytes):
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            doc = discovery(self.path.split("?")[0])
            code = 200 if doc else 404
            self.reply(code, "application/json", json.dumps(doc or {"kind": "Status", "code": 404}).encode())

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            type_meta = read_fields(read_fields(body.removeprefix(MAGIC))[1])
            api_version, kind = type_meta.get(1, b"").decode(), type_meta[2].decode()
            obj = zero_message(kinds[(api_version, kind)], messages)
            envelope = length_delimited(1, length_delimited(1, api_version.encode()) + length_delimited(2, kind.encode()))
            self.reply(201, "application/vnd.kubernetes.protobuf", MAGIC + envelope + length_delimited(2, obj))

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# ------------------------------------------------------------------- probing


def kubectl() -> str:
    if os.environ.get("KUBECTL"):
        return os.environ["KUBECTL"]
    found = shutil.which("kubectl")
    if not found:
        sys.exit("probe.py: no kubectl on PATH (set KUBECTL)")
    beside = Path(os.path.realpath(found)).with_name("kubectl.1.33")
    return str(beside) if beside.exists() else found


def json_names(name: str, messages) -> set[str]:
    """The keys a message can put in its JSON object, embedded (`,inline`) structs expanded."""
    names = set()
    for f in messages[name]:
        names |= json_names(f.type, messages) if f.json == ",inline" else {f.json}
    return names


def walk(name: str, obj: dict, messages, seen: dict[str, dict[str, bool]], strangers: set[str], inline=False):
    """Record, for each scalar field of `name`, whether its zero value is in Go's JSON `obj`."""
    if SPECIAL.search(name) or not isinstance(obj, dict):
        return
    # Go printed a key our schema does not have: gen.py got a JSON name wrong.
    if not inline:
        strangers |= {f"{name}: {key}" for key in set(obj) - json_names(name, messages) - {"apiVersion", "kind"}}
    probed = seen.setdefault(name, {})
    for f in messages[name]:
        if f.json == ",inline":
            walk(f.type, obj, messages, seen, strangers, inline=True)
        elif f.label == "optional" and f.type in ("int32", "int64", "bool", "double", "string", "bytes", "uint32", "uint64"):
            probed[f.json] = probed.get(f.json, False) or f.json in obj
        elif f.json in obj and "." in f.type:
            value = obj[f.json]
            if f.label == "repeated" and isinstance(value, list) and value:
                value = value[0]
            elif f.label == "map" and isinstance(value, dict):
                value = value.get("k")
            walk(f.type, value, messages, seen, strangers)


def main() -> None:
    messages = read_schemas()
    kinds = {}
    for line in (HERE / "kinds.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            api_version, kind, message = line.split()
            kinds[(api_version, kind)] = message
    server = serve(messages, kinds)
    binary = kubectl()
    version = subprocess.run([binary, "version", "--client", "-o", "json"], capture_output=True, text=True)
    client = json.loads(version.stdout)["clientVersion"]["gitVersion"] if version.returncode == 0 else "?"
    seen: dict[str, dict[str, bool]] = {}
    strangers: set[str] = set()
    with tempfile.TemporaryDirectory() as home:
        for args in COMMANDS:
            run = subprocess.run(
                [binary, "--server", f"http://127.0.0.1:{server.server_port}", *args, "-o", "json"],
                capture_output=True,
                text=True,
                env={**os.environ, "HOME": home, "KUBECONFIG": os.path.join(home, "none")},
            )
            if run.returncode != 0:
                sys.exit(f"probe.py: kubectl {' '.join(args)} failed: {run.stderr.strip()}")
            obj = json.loads(run.stdout)
            walk(kinds[(obj.get("apiVersion", ""), obj["kind"])], obj, messages, seen, strangers)
    server.shutdown()
    lines = [
        f"# Generated by proto/k8s/probe.py with kubectl {client}. Do not edit.",
        "# message, then the fields whose zero value (0, false, \"\") Go's JSON still writes:",
        "# pointers and fields without omitempty. Other zero fields of these messages are left out.",
    ]
    lines += [" ".join([name] + sorted(k for k, kept in fields.items() if kept)) for name, fields in sorted(seen.items())]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"probed {len(seen)} messages with kubectl {client}; wrote {OUT}")
    if strangers:
        print("JSON names kubectl printed that the schemas lack (fix gen.py):", *sorted(strangers), sep="\n  ")
        sys.exit(1)


if __name__ == "__main__":
    main()
