"""The Python `kubernetes` client with a CRD and its custom resources:
create the CRD, wait until Established, CRUD, list with selectors, patch,
server-side apply, a 409 on a stale update, a watch, and deletion.
"""

import threading
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

GROUP, VERSION, PLURAL = "stable.example.com", "v1", "crontabs"

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
        "versions": [{
            "name": VERSION, "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "cronSpec": {"type": "string", "pattern": r"^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$"},
                "image": {"type": "string"},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
            }}}}},
        }],
    },
}


def crontab(name, spec, labels=None):
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "CronTab",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def main():
    config.load_kube_config()
    ext = client.ApiextensionsV1Api()
    custom = client.CustomObjectsApi()
    ext.create_custom_resource_definition(CRD)
    for _ in range(100):
        conditions = ext.read_custom_resource_definition(f"{PLURAL}.{GROUP}").status.conditions or []
        if any(c.type == "Established" and c.status == "True" for c in conditions):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("CRD not established")

    ns = "default"
    created = custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, crontab("a", {"cronSpec": "* * * * */5", "image": "img"}, {"tier": "x"}))
    assert created["spec"]["replicas"] == 1, created
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, crontab("b", {"cronSpec": "*/2 * * * *", "image": "img"}, {"tier": "y"}))
    try:
        custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, crontab("bad", {"cronSpec": "nope", "replicas": 50}))
        raise AssertionError("invalid custom resource accepted")
    except ApiException as e:
        assert e.status == 422, e
        assert "spec.replicas" in e.body and "spec.cronSpec" in e.body, e.body

    listed = custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, label_selector="tier=y")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["b"], listed
    page = custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, limit=1)
    assert len(page["items"]) == 1 and page["metadata"].get("continue"), page

    patched = custom.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "a", {"spec": {"image": "img:2"}})
    assert patched["spec"]["image"] == "img:2" and patched["metadata"]["generation"] == 2, patched

    stale = dict(created)
    stale["spec"] = dict(created["spec"], image="stale")
    try:
        custom.replace_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "a", stale)
        raise AssertionError("stale update accepted")
    except ApiException as e:
        assert e.status == 409, e

    rv = custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["metadata"]["resourceVersion"]
    events = []

    def collect():
        w = watch.Watch()
        for event in w.stream(custom.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, resource_version=rv, timeout_seconds=20):
            events.append((event["type"], event["object"]["metadata"]["name"]))
            if event["type"] == "DELETED":
                w.stop()

    watcher = threading.Thread(target=collect)
    watcher.start()
    time.sleep(1)
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, crontab("c", {"cronSpec": "* * * * *"}))
    custom.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "c", {"spec": {"replicas": 3}})
    custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "c")
    watcher.join(timeout=30)
    assert events == [("ADDED", "c"), ("MODIFIED", "c"), ("DELETED", "c")], events

    ext.delete_custom_resource_definition(f"{PLURAL}.{GROUP}")
    for _ in range(100):
        try:
            ext.read_custom_resource_definition(f"{PLURAL}.{GROUP}")
            time.sleep(0.1)
        except ApiException as e:
            assert e.status == 404
            break
    else:
        raise AssertionError("CRD not deleted")
    print("python crd: all checks passed")


if __name__ == "__main__":
    main()
