"""Every built-in kind through the official Python client's typed API.

Run by tests/tests/builtins.rs with KUBECONFIG set and, on stdin, a JSON
list of one object of every stored kind. For each: create, read, replace,
patch (JSON, merge and strategic), delete and delete_collection, every
answer parsed by the client's own model classes (a parse failure raises).
Prints one line per failure, then "typed sweep: N kinds, F failures".
"""

import json
import re
import sys

from kubernetes import client, config
from kubernetes.client.rest import ApiException


def api_class(api_version):
    group, _, version = api_version.rpartition("/")
    words = group.replace(".k8s.io", "").split(".") if group else ["core"]
    return getattr(client, "".join(w.capitalize() for w in words) + version.capitalize() + "Api")


def snake(kind):
    # CSIDriver -> csi_driver, IPAddress -> ip_address, ServiceCIDR -> service_cidr.
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", kind).lower()


def another_name(kind, name):
    """A second object's name: an IPAddress is named by its address, so the next one."""
    if kind == "IPAddress":
        head, _, last = name.rpartition(".")
        return f"{head}.{int(last) + 1}"
    return name + "-again"


def main():
    config.load_kube_config()
    objects = json.load(sys.stdin)
    failures = []
    for obj in objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        ns = obj["metadata"].get("namespace")
        api = api_class(obj["apiVersion"])()
        scope = "namespaced_" if ns else ""
        suffix = scope + snake(kind)
        where = (name, ns) if ns else (name,)
        label = "sweep=" + snake(kind).replace("_", "-")

        def call(verb, *args, **kwargs):
            method = getattr(api, f"{verb}_{suffix}")
            return method(*args, **kwargs)

        def typed(what, answer):
            # The client built its own model: a class named for the kind.
            if not type(answer).__name__.endswith(kind):
                failures.append(f"{kind} {what}: got {type(answer).__name__}")

        step = "create"
        try:
            body = dict(obj)
            body["metadata"] = dict(obj["metadata"], labels=dict(obj["metadata"].get("labels", {}), sweep=label.split("=")[1]))
            typed("create", call("create", *((ns,) if ns else ()), body))
            step = "read"
            current = call("read", *where)
            typed("read", current)
            step = "replace"
            for attempt in range(5):
                current.metadata.labels["replaced"] = "yes"
                try:
                    typed("replace", call("replace", *where, current))
                    break
                except ApiException as e:
                    # A controller may write the object between the read and
                    # the replace (the ValidatingAdmissionPolicy status
                    # controller does, right after a create): read it again.
                    if e.status != 409 or attempt == 4:
                        raise
                    current = call("read", *where)
            for patch_type, patch in [
                ("application/json-patch+json", [{"op": "add", "path": "/metadata/labels/json", "value": "yes"}]),
                ("application/merge-patch+json", {"metadata": {"labels": {"merge": "yes"}}}),
                ("application/strategic-merge-patch+json", {"metadata": {"labels": {"strategic": "yes"}}}),
            ]:
                step = "patch " + patch_type
                typed(step, call("patch", *where, patch, _content_type=patch_type))
            step = "read after patches"
            labels = call("read", *where).metadata.labels
            for key in ("replaced", "json", "merge", "strategic"):
                if labels.get(key) != "yes":
                    failures.append(f"{kind}: label {key} missing after the patches: {labels}")
            step = "delete"
            call("delete", *where)
            step = "delete_collection"
            body["metadata"] = dict(body["metadata"], name=another_name(kind, name))
            body["metadata"].pop("resourceVersion", None)
            call("create", *((ns,) if ns else ()), body)
            status = call("delete_collection", *((ns,) if ns else ()), label_selector=label)
            if not isinstance(status, (client.V1Status, dict)) and not type(status).__name__.endswith("List"):
                failures.append(f"{kind} delete_collection: got {type(status).__name__}")
        except Exception as e:  # noqa: BLE001 - every failure is reported
            text = str(e).replace("\n", " ")[:400]
            failures.append(f"{kind} {step}: {type(e).__name__}: {text}")
    for line in failures:
        print(line)
    print(f"typed sweep: {len(objects)} kinds, {len(failures)} failures")


if __name__ == "__main__":
    main()
