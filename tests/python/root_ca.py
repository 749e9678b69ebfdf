"""What kube's root CA publisher keeps in every namespace, for the scripts
that list a namespace's ConfigMaps: its `kube-root-ca.crt` is listed beside
their own."""

import time

from kubernetes.client.rest import ApiException

ROOT_CA = "kube-root-ca.crt"


def wait_for_root_ca(core, namespace):
    """Waits for the namespace's kube-root-ca.crt, as kube's e2e framework
    does before a test counts what a new namespace holds."""
    for _ in range(100):
        try:
            return core.read_namespaced_config_map(ROOT_CA, namespace)
        except ApiException as e:
            assert e.status == 404, e
            time.sleep(0.1)
    raise AssertionError(f"no {ROOT_CA} in {namespace}")
