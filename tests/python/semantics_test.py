"""Generic semantics of built-in resources through the official Python
`kubernetes` client against a kubechain cluster.

Run by tests/tests/python_semantics.rs with KUBECONFIG pointing at the
cluster: server-side apply with two field managers (conflict, force,
managedFields), watch bookmarks, resuming a watch from an earlier
resourceVersion, timeoutSeconds, resourceVersionMatch on lists, and
sendInitialEvents.

The server sends bookmarks every 60 seconds, so one watch runs for 65
seconds in a thread while the other checks run.
"""

import json
import threading
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from root_ca import ROOT_CA, wait_for_root_ca

NAMESPACE = "semantics"
APPLY = "application/apply-patch+yaml"
BOOKMARK_WATCH_SECONDS = 65


def configmap(name, data):
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data=data)


def deployment(replicas=None, containers=None, labels=None):
    """An apply configuration for the Deployment `web` (only what is given)."""
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    spec = {}
    if replicas is not None:
        spec["replicas"] = replicas
    if containers is not None:
        spec["selector"] = {"matchLabels": {"app": "web"}}
        spec["template"] = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}}
    if labels is not None:
        body["metadata"]["labels"] = labels
    if spec:
        body["spec"] = spec
    return body


def expect_api_error(status, call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except ApiException as e:
        assert e.status == status, (e.status, e.body)
        return json.loads(e.body) if e.body else {}
    raise AssertionError(f"{call.__name__} succeeded; expected {status}")


def managers(obj):
    return {(m.manager, m.operation): m.fields_v1 for m in obj.metadata.managed_fields or []}


def server_side_apply(apps):
    """Two managers apply the same Deployment."""
    def apply(body, manager, force=False):
        return apps.patch_namespaced_deployment("web", NAMESPACE, body, field_manager=manager, force=force, _content_type=APPLY)

    # Apply creates an absent object.
    web = apply(deployment(2, [{"name": "web", "image": "nginx:1.25", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]), "alice")
    assert web.spec.replicas == 2
    assert web.metadata.generation == 1
    assert set(managers(web)) == {("alice", "Apply")}, managers(web)
    owned = managers(web)[("alice", "Apply")]
    assert "f:replicas" in owned["f:spec"], owned
    assert 'k:{"name":"web"}' in owned["f:spec"]["f:template"]["f:spec"]["f:containers"], owned

    # bob's apply of a field alice owns, with another value: 409 naming the field and its owner.
    status = expect_api_error(409, apply, deployment(3), "bob")
    assert status["reason"] == "Conflict", status
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "alice": .spec.replicas', status["message"]
    assert status["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "alice"', "field": ".spec.replicas"}
    ], status["details"]
    assert apps.read_namespaced_deployment("web", NAMESPACE).spec.replicas == 2

    # The same value is no conflict: both managers then own the field.
    shared = apply(deployment(2), "carol")
    assert "f:replicas" in managers(shared)[("carol", "Apply")]["f:spec"]
    assert "f:replicas" in managers(shared)[("alice", "Apply")]["f:spec"]

    # force=true takes ownership from every other manager.
    forced = apply(deployment(3), "bob", force=True)
    assert forced.spec.replicas == 3
    fields = managers(forced)
    assert set(fields) == {("alice", "Apply"), ("bob", "Apply")}, fields.keys()
    assert fields[("bob", "Apply")]["f:spec"] == {"f:replicas": {}}, fields[("bob", "Apply")]
    assert "f:replicas" not in fields[("alice", "Apply")]["f:spec"], fields[("alice", "Apply")]
    assert forced.spec.template.spec.containers[0].image == "nginx:1.25", "force changed only bob's field"
    assert forced.metadata.generation == 2

    # Lists merge by key: bob's sidecar joins alice's container.
    both = apply(deployment(3, [{"name": "sidecar", "image": "busybox:1.36"}]), "bob")
    assert [c.name for c in both.spec.template.spec.containers] == ["web", "sidecar"], both.spec.template.spec.containers
    # alice drops env B and stops managing replicas: B goes, replicas stay bob's.
    dropped = apply(deployment(None, [{"name": "web", "image": "nginx:1.25", "env": [{"name": "A", "value": "1"}]}]), "alice")
    assert dropped.spec.replicas == 3
    web_container = next(c for c in dropped.spec.template.spec.containers if c.name == "web")
    assert [(e.name, e.value) for e in web_container.env] == [("A", "1")], web_container.env
    # An Update manager and an Apply manager: a plain patch takes over a field silently.
    patched = apps.patch_namespaced_deployment("web", NAMESPACE, {"spec": {"replicas": 4}}, field_manager="scaler")
    assert patched.spec.replicas == 4
    fields = managers(patched)
    assert fields[("scaler", "Update")]["f:spec"] == {"f:replicas": {}}, fields
    assert ("bob", "Apply") in fields and "f:replicas" not in fields[("bob", "Apply")].get("f:spec", {}), fields
    status = expect_api_error(409, apply, deployment(5), "bob")
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "scaler" using apps/v1: .spec.replicas', status["message"]


def watch_events(func, *args, stop_after=None, **kwargs):
    """Every event of a watch until it ends (or `stop_after` events)."""
    events = []
    w = watch.Watch()
    for event in w.stream(func, *args, **kwargs):
        events.append(event)
        if stop_after is not None and len(events) >= stop_after:
            w.stop()
    return events


def summary(events):
    return [(e["type"], e["raw_object"]["metadata"].get("name")) for e in events]


def rv_of(event):
    return int(event["raw_object"]["metadata"]["resourceVersion"])


def main():
    config.load_kube_config()
    core = client.CoreV1Api()
    apps = client.AppsV1Api()
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
    wait_for_root_ca(core, NAMESPACE)
    list_cms = core.list_namespaced_config_map

    # A watch allowing bookmarks, for the whole run: bookmarks every 60 s.
    start_rv = list_cms(NAMESPACE).metadata.resource_version
    bookmark_watch = {}

    def watch_with_bookmarks():
        started = time.monotonic()
        events = watch_events(list_cms, NAMESPACE, resource_version=start_rv, allow_watch_bookmarks=True,
                              timeout_seconds=BOOKMARK_WATCH_SECONDS)
        bookmark_watch["events"] = events
        bookmark_watch["elapsed"] = time.monotonic() - started

    bookmarks_thread = threading.Thread(target=watch_with_bookmarks, daemon=True)
    bookmarks_thread.start()

    server_side_apply(apps)

    # History: writes after rv0, then a watch from rv0 replays them all, in order.
    core.create_namespaced_config_map(NAMESPACE, configmap("base", {"v": "0"}))
    rv0 = list_cms(NAMESPACE).metadata.resource_version
    core.create_namespaced_config_map(NAMESPACE, configmap("r1", {"v": "1"}))
    core.create_namespaced_config_map(NAMESPACE, configmap("r2", {"v": "1"}))
    rv_mid = list_cms(NAMESPACE).metadata.resource_version
    core.patch_namespaced_config_map("r1", NAMESPACE, {"data": {"v": "2"}})
    core.delete_namespaced_config_map("r2", NAMESPACE)
    core.create_namespaced_config_map(NAMESPACE, configmap("r3", {"v": "1"}))
    expected = [("ADDED", "r1"), ("ADDED", "r2"), ("MODIFIED", "r1"), ("DELETED", "r2"), ("ADDED", "r3")]

    started = time.monotonic()
    replayed = watch_events(list_cms, NAMESPACE, resource_version=rv0, timeout_seconds=3)
    elapsed = time.monotonic() - started
    assert summary(replayed) == expected, summary(replayed)
    rvs = [rv_of(e) for e in replayed]
    assert rvs == sorted(set(rvs)) and rvs[0] > int(rv0), (rv0, rvs)
    assert replayed[2]["object"].data == {"v": "2"}
    # timeoutSeconds ends the watch (the client gives up no sooner).
    assert 2.5 <= elapsed < 8, elapsed
    # From the middle: only what came after.
    later = watch_events(list_cms, NAMESPACE, resource_version=rv_mid, timeout_seconds=2)
    assert summary(later) == expected[2:], summary(later)
    # From an event's own resourceVersion: what follows it.
    after_first = watch_events(list_cms, NAMESPACE, resource_version=str(rvs[0]), timeout_seconds=2)
    assert summary(after_first) == expected[1:], summary(after_first)
    # An idle watch ends after timeoutSeconds with nothing.
    started = time.monotonic()
    idle = watch_events(core.list_namespaced_secret, NAMESPACE, resource_version=rv0, timeout_seconds=2)
    assert idle == [], summary(idle)
    assert 1.5 <= time.monotonic() - started < 7

    # resourceVersionMatch on lists.
    # kube-root-ca.crt, there from the start, is in every list.
    now = list_cms(NAMESPACE)
    names = lambda result: sorted(i.metadata.name for i in result.items)
    assert names(now) == ["base", ROOT_CA, "r1", "r3"], names(now)
    newer = list_cms(NAMESPACE, resource_version=rv0, resource_version_match="NotOlderThan")
    assert names(newer) == ["base", ROOT_CA, "r1", "r3"], names(newer)
    assert int(newer.metadata.resource_version) >= int(now.metadata.resource_version)
    exact = list_cms(NAMESPACE, resource_version=rv0, resource_version_match="Exact")
    assert names(exact) == ["base", ROOT_CA], names(exact)
    assert exact.metadata.resource_version == rv0, (exact.metadata.resource_version, rv0)
    exact_mid = list_cms(NAMESPACE, resource_version=rv_mid, resource_version_match="Exact")
    assert names(exact_mid) == ["base", ROOT_CA, "r1", "r2"], names(exact_mid)
    mine = {i.metadata.name: i.data["v"] for i in exact_mid.items if i.metadata.name != ROOT_CA}
    assert mine == {"base": "0", "r1": "1", "r2": "1"}, mine
    # Paging through an exact list stays at that revision (r2, deleted
    # since, is on the second page).
    page = list_cms(NAMESPACE, resource_version=rv_mid, resource_version_match="Exact", limit=2)
    assert names(page) == ["base", ROOT_CA] and page.metadata._continue, page.metadata
    rest = list_cms(NAMESPACE, limit=2, _continue=page.metadata._continue)
    assert names(rest) == ["r1", "r2"], names(rest)
    status = expect_api_error(422, list_cms, NAMESPACE, resource_version_match="Exact")
    assert status["reason"] == "Invalid", status
    assert "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided" in status["message"], status
    status = expect_api_error(422, list_cms, NAMESPACE, resource_version="0", resource_version_match="Bogus")
    assert 'resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", ""' in status["message"], status

    # sendInitialEvents: the current state as ADDED events, a bookmark marking
    # their end, then what happens next.
    initial = []

    def watch_initial():
        w = watch.Watch()
        for event in w.stream(list_cms, NAMESPACE, send_initial_events=True, allow_watch_bookmarks=True,
                              resource_version_match="NotOlderThan", timeout_seconds=20):
            initial.append(event)
            if event["type"] == "ADDED" and event["raw_object"]["metadata"]["name"] == "after-initial":
                w.stop()

    initial_thread = threading.Thread(target=watch_initial, daemon=True)
    initial_thread.start()
    deadline = time.monotonic() + 10
    while not any(e["type"] == "BOOKMARK" for e in initial) and time.monotonic() < deadline:
        time.sleep(0.1)
    core.create_namespaced_config_map(NAMESPACE, configmap("after-initial", {"v": "1"}))
    initial_thread.join(timeout=20)
    kinds = [e["type"] for e in initial]
    assert kinds == ["ADDED", "ADDED", "ADDED", "ADDED", "BOOKMARK", "ADDED"], summary(initial)
    assert sorted(n for _, n in summary(initial[:4])) == ["base", ROOT_CA, "r1", "r3"], summary(initial)
    end = initial[4]["raw_object"]
    assert end["kind"] == "ConfigMap" and end["apiVersion"] == "v1", end
    assert end["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}, end
    assert int(end["metadata"]["resourceVersion"]) >= max(rv_of(e) for e in initial[:4]), end
    assert initial[5]["raw_object"]["metadata"]["name"] == "after-initial"
    # sendInitialEvents needs resourceVersionMatch=NotOlderThan.
    status = expect_api_error(422, list_cms, NAMESPACE, watch=True, send_initial_events=True, allow_watch_bookmarks=True,
                              _preload_content=False)
    assert "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan" in status["message"], status

    # The bookmark watch: it saw every change, then at least one bookmark
    # (60 s in), and ended at its timeout.
    bookmarks_thread.join(timeout=BOOKMARK_WATCH_SECONDS + 30)
    assert "events" in bookmark_watch, "the bookmark watch did not end"
    events = bookmark_watch["events"]
    assert BOOKMARK_WATCH_SECONDS - 1 <= bookmark_watch["elapsed"] < BOOKMARK_WATCH_SECONDS + 10, bookmark_watch["elapsed"]
    changes = [e for e in events if e["type"] != "BOOKMARK"]
    assert summary(changes) == [("ADDED", "base")] + expected + [("ADDED", "after-initial")], summary(changes)
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, "no BOOKMARK in %d seconds" % BOOKMARK_WATCH_SECONDS
    for bookmark in bookmarks:
        obj = bookmark["raw_object"]
        assert obj["kind"] == "ConfigMap" and obj["apiVersion"] == "v1", obj
        assert int(obj["metadata"]["resourceVersion"]) >= max(rv_of(e) for e in changes), obj
        assert "k8s.io/initial-events-end" not in (obj["metadata"].get("annotations") or {}), obj
    # A bookmark is a place to resume from: nothing before it comes again.
    last = bookmarks[-1]["raw_object"]["metadata"]["resourceVersion"]
    assert watch_events(list_cms, NAMESPACE, resource_version=last, timeout_seconds=1) == []

    core.delete_namespace(NAMESPACE)
    print("python semantics: all checks passed")


if __name__ == "__main__":
    main()
