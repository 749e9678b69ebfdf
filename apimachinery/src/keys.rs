//! The etcd key layout, kube-apiserver's: `<root>/<resource>/[<namespace>/]<name>`
//! for the core group and `<root>/<group>/<resource>/[<namespace>/]<name>`
//! otherwise. Every place that reads or writes a key builds it here.

/// The etcd key prefix of a group's resource under `root`:
/// `/registry/<resource>/` for core, `/registry/<group>/<resource>/` otherwise.
pub fn key_prefix(root: &str, group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("{root}/{plural}/")
    } else {
        format!("{root}/{group}/{plural}/")
    }
}

/// The etcd key of one object: the resource's [`key_prefix`], then the
/// namespace (for namespaced objects), then the name.
pub fn object_key(root: &str, group: &str, plural: &str, namespace: &str, name: &str) -> String {
    let prefix = key_prefix(root, group, plural);
    if namespace.is_empty() {
        format!("{prefix}{name}")
    } else {
        format!("{prefix}{namespace}/{name}")
    }
}

/// The etcd key prefix of one namespace's objects of a resource.
pub fn namespace_prefix(root: &str, group: &str, plural: &str, namespace: &str) -> String {
    format!("{}{namespace}/", key_prefix(root, group, plural))
}

/// Where each server replica registers its gRPC address under a lease:
/// `<ENDPOINTS><component>/<instance>`.
pub const ENDPOINTS: &str = "/kubechain/endpoints/";

/// The scheme of a registered address that is a Unix socket on the
/// server's host (`unix:///run/kubechain/core-server.sock`).
pub const UNIX_SCHEME: &str = "unix://";

/// Where leader-election leases live: `<LEASES><name>`.
pub const LEASES: &str = "/kubechain/leases/";

/// Where core-server records allocated service IPs and node ports.
pub const ALLOCATIONS: &str = "/kubechain/allocations/";

/// Where the aggregator remembers each aggregated server's last discovery.
pub const AGGREGATED_DISCOVERY: &str = "/kubechain/aggregated-discovery/";

/// The key the etcd store writes to learn etcd's current revision.
pub const REVISION: &str = "/kubechain/revision";

/// The leader-election lease key of `name`.
pub fn lease(name: &str) -> String {
    format!("{LEASES}{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_and_group_keys_follow_kube_layout() {
        assert_eq!(key_prefix("/registry", "", "pods"), "/registry/pods/");
        assert_eq!(
            key_prefix("/registry", "apps", "deployments"),
            "/registry/apps/deployments/"
        );
        assert_eq!(
            object_key("/registry", "", "pods", "ns", "p"),
            "/registry/pods/ns/p"
        );
        assert_eq!(
            object_key("/registry", "", "nodes", "", "n"),
            "/registry/nodes/n"
        );
        assert_eq!(
            namespace_prefix("/r", "apps", "deployments", "ns"),
            "/r/apps/deployments/ns/"
        );
        assert_eq!(
            lease("aggregator-controllers"),
            "/kubechain/leases/aggregator-controllers"
        );
    }
}
