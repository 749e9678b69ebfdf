"""A ServiceAccount bound to `edit` in `team`, doing its work with the
official Python `kubernetes` client.

Run by tests/tests/rbac.rs with KUBECONFIG holding the account's token: it
writes configmaps, secrets and deployments in its namespace, and is refused,
with kube's messages, what edit does not grant.
"""

import json

from kubernetes import client, config
from kubernetes.client.rest import ApiException

NAMESPACE = "team"
ME = "system:serviceaccount:team:deployer"


def refused(call, message):
    try:
        call()
    except ApiException as e:
        assert e.status == 403, (e.status, e.body)
        body = json.loads(e.body)
        assert body["reason"] == "Forbidden", body
        assert body["message"] == message, body["message"]
        return
    raise AssertionError("allowed: " + message)


def main():
    config.load_kube_config()
    core = client.CoreV1Api()
    apps = client.AppsV1Api()
    rbac = client.RbacAuthorizationV1Api()

    core.create_namespaced_config_map(
        NAMESPACE, {"metadata": {"name": "settings"}, "data": {"level": "1"}}
    )
    core.patch_namespaced_config_map("settings", NAMESPACE, {"data": {"level": "2"}})
    assert core.read_namespaced_config_map("settings", NAMESPACE).data["level"] == "2"
    core.create_namespaced_secret(
        NAMESPACE, {"metadata": {"name": "password"}, "stringData": {"p": "s3cret"}}
    )
    assert core.read_namespaced_secret("password", NAMESPACE).data["p"] == "czNjcmV0"
    apps.create_namespaced_deployment(
        NAMESPACE,
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx"}]},
                },
            },
        },
    )
    apps.patch_namespaced_deployment_scale("web", NAMESPACE, {"spec": {"replicas": 3}})
    assert apps.read_namespaced_deployment("web", NAMESPACE).spec.replicas == 3
    assert [d.metadata.name for d in apps.list_namespaced_deployment(NAMESPACE).items] == ["web"]

    refused(
        lambda: rbac.create_namespaced_role_binding(
            NAMESPACE,
            {
                "metadata": {"name": "me-admin"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
                "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": NAMESPACE}],
            },
        ),
        f'rolebindings.rbac.authorization.k8s.io is forbidden: User "{ME}" cannot create resource '
        f'"rolebindings" in API group "rbac.authorization.k8s.io" in the namespace "{NAMESPACE}"',
    )
    refused(
        lambda: core.list_namespaced_config_map("default"),
        f'configmaps is forbidden: User "{ME}" cannot list resource "configmaps" in API group "" '
        'in the namespace "default"',
    )
    refused(
        lambda: core.list_node(),
        f'nodes is forbidden: User "{ME}" cannot list resource "nodes" in API group "" at the cluster scope',
    )
    refused(
        lambda: core.replace_namespaced_resource_quota(
            "q", NAMESPACE, {"metadata": {"name": "q"}, "spec": {}}
        ),
        f'resourcequotas "q" is forbidden: User "{ME}" cannot update resource "resourcequotas" '
        f'in API group "" in the namespace "{NAMESPACE}"',
    )
    core.delete_namespaced_config_map("settings", NAMESPACE)
    print("python rbac: all checks passed")


if __name__ == "__main__":
    main()
