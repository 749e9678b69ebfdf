"""The official Python `kubernetes` client against a kubechain cluster.

Run by tests/tests/python_client.rs with KUBECONFIG pointing at the cluster:
CRUD, a paginated list, label selectors, a 409 on a stale update, a watch.
"""

import threading
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from root_ca import ROOT_CA, wait_for_root_ca

NAMESPACE = "python"


def configmap(name, labels, data):
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels), data=data)


def names(items):
    return sorted(i.metadata.name for i in items)


def main():
    config.load_kube_config()
    core = client.CoreV1Api()

    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
    assert core.read_namespace(NAMESPACE).status.phase == "Active"
    wait_for_root_ca(core, NAMESPACE)

    # Create, read, update, patch.
    for i in range(25):
        app = "a" if i % 2 == 0 else "b"
        core.create_namespaced_config_map(NAMESPACE, configmap(f"cm-{i:02d}", {"app": app, "index": str(i)}, {"i": str(i)}))
    first = core.read_namespaced_config_map("cm-00", NAMESPACE)
    assert first.data == {"i": "0"}, first.data
    first.data["i"] = "zero"
    updated = core.replace_namespaced_config_map("cm-00", NAMESPACE, first)
    assert updated.data["i"] == "zero"
    assert int(updated.metadata.resource_version) > int(first.metadata.resource_version)
    patched = core.patch_namespaced_config_map("cm-00", NAMESPACE, {"metadata": {"labels": {"patched": "yes"}}})
    assert patched.metadata.labels["patched"] == "yes"

    # A stale update is a 409 Conflict.
    try:
        core.replace_namespaced_config_map("cm-00", NAMESPACE, first)
        raise AssertionError("stale update succeeded")
    except ApiException as e:
        assert e.status == 409, e
        assert "the object has been modified" in e.body, e.body

    # Creating twice is a 409 AlreadyExists; a missing object a 404.
    try:
        core.create_namespaced_config_map(NAMESPACE, configmap("cm-01", {}, {}))
        raise AssertionError("duplicate create succeeded")
    except ApiException as e:
        assert e.status == 409 and "AlreadyExists" in e.body, e
    try:
        core.read_namespaced_config_map("absent", NAMESPACE)
        raise AssertionError("read of a missing object succeeded")
    except ApiException as e:
        assert e.status == 404, e

    # Paginated list: the 25 and kube-root-ca.crt.
    seen, token, pages = [], None, 0
    while True:
        page = core.list_namespaced_config_map(NAMESPACE, limit=10, _continue=token)
        pages += 1
        seen.extend(page.items)
        token = page.metadata._continue
        if pages == 1:
            assert page.metadata.remaining_item_count == 16, page.metadata.remaining_item_count
            first_rv = page.metadata.resource_version
        elif pages == 2:
            # Written between pages: the later pages stay at the first's revision.
            core.create_namespaced_config_map(NAMESPACE, configmap("cm-late", {}, {}))
        assert page.metadata.resource_version == first_rv, page.metadata
        if not token:
            break
    assert pages == 3, pages
    assert names(seen) == [f"cm-{i:02d}" for i in range(25)] + [ROOT_CA], names(seen)
    core.delete_namespaced_config_map("cm-late", NAMESPACE)

    # Label selectors.
    def select(selector):
        return names(core.list_namespaced_config_map(NAMESPACE, label_selector=selector).items)

    # kube-root-ca.crt has no labels: `!=` and `!` select it too.
    assert len(select("app=a")) == 13
    assert select("app!=a") == [f"cm-{i:02d}" for i in range(1, 25, 2)] + [ROOT_CA]
    assert select("index in (3,4)") == ["cm-03", "cm-04"]
    assert len(select("app=b,index notin (1,3,5)")) == 9
    assert select("patched") == ["cm-00"]
    assert len(select("!patched")) == 25
    field = core.list_namespaced_config_map(NAMESPACE, field_selector="metadata.name=cm-07").items
    assert names(field) == ["cm-07"]

    # Watch from the list's resourceVersion.
    rv = core.list_namespaced_config_map(NAMESPACE, limit=1).metadata.resource_version
    events = []

    def collect():
        w = watch.Watch()
        for event in w.stream(core.list_namespaced_config_map, NAMESPACE, resource_version=rv, timeout_seconds=20):
            events.append((event["type"], event["object"].metadata.name))
            if event["type"] == "DELETED" and event["object"].metadata.name == "watched":
                w.stop()

    watcher = threading.Thread(target=collect)
    watcher.start()
    time.sleep(1)
    core.create_namespaced_config_map(NAMESPACE, configmap("watched", {"w": "1"}, {"v": "1"}))
    core.patch_namespaced_config_map("watched", NAMESPACE, {"data": {"v": "2"}})
    core.delete_namespaced_config_map("watched", NAMESPACE)
    watcher.join(timeout=30)
    assert events == [("ADDED", "watched"), ("MODIFIED", "watched"), ("DELETED", "watched")], events

    # Delete one object, then the namespace with its content.
    core.delete_namespaced_config_map("cm-24", NAMESPACE)
    assert len(core.list_namespaced_config_map(NAMESPACE).items) == 24 + 1
    core.delete_namespace(NAMESPACE)
    for _ in range(100):
        try:
            core.read_namespace(NAMESPACE)
            time.sleep(0.1)
        except ApiException as e:
            assert e.status == 404
            break
    else:
        raise AssertionError("namespace was not deleted")
    print("python client: all checks passed")


if __name__ == "__main__":
    main()
