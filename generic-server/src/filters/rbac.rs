//! The RBAC authorizer, kube's: Roles, ClusterRoles and their bindings read
//! from the watch cache (never from etcd per request), indexed by subject and
//! re-indexed only after one of them changes.

use std::sync::Arc;

use apimachinery::error::Result;
use apimachinery::rbac::{Decision, Policy, Rules, User};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde::de::DeserializeOwned;

use super::authorization::{Authorizer, Opinion, always_allowed, attributes};
use crate::request::UserInfo;
use crate::request_info::RequestInfo;
use crate::storage::cacher::{Cacher, Derived, ResourceCache, generic_ingest};

/// The four RBAC resources, in the order [`Rbac`] keeps their caches.
const RESOURCES: [&str; 4] = [
    "roles",
    "rolebindings",
    "clusterroles",
    "clusterrolebindings",
];

/// The group superusers are in: allowed everything, bound or not.
pub const SUPERUSERS: &str = "system:masters";

/// Decides by RBAC policy, as kube-apiserver's `--authorization-mode=RBAC`.
pub struct Rbac {
    /// The policy, from roles, bindings, cluster roles and cluster bindings.
    policy: Derived<Policy>,
}

impl Rbac {
    /// Follows the RBAC objects in `cacher` (registering their caches if the
    /// server does not serve them itself).
    pub async fn new(cacher: &Cacher, etcd_root: &str) -> crate::Result<Rbac> {
        let mut caches = Vec::with_capacity(RESOURCES.len());
        for resource in RESOURCES {
            let prefix =
                apimachinery::keys::key_prefix(etcd_root, apimachinery::rbac::GROUP, resource);
            caches.push(cacher.register(&prefix, generic_ingest()).await?);
        }
        Ok(Rbac {
            policy: Derived::new(caches),
        })
    }

    /// The policy as the caches hold it now.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.get(Self::build)
    }

    fn build(caches: &[Arc<ResourceCache>]) -> Policy {
        fn each<T: DeserializeOwned>(cache: &ResourceCache, mut add: impl FnMut(T)) {
            for object in cache.snapshot(cache.prefix(), 0).objects {
                match serde_json::from_slice::<T>(&object.bytes) {
                    Ok(typed) => add(typed),
                    Err(e) => {
                        tracing::warn!(key = %object.key, error = %e, "skipping an RBAC object that does not decode")
                    }
                }
            }
        }
        let mut policy = Policy::default();
        let [roles, bindings, cluster_roles, cluster_bindings] = caches else {
            return policy;
        };
        each::<Role>(roles, |r| policy.add_role(r));
        each::<RoleBinding>(bindings, |b| policy.add_binding(b));
        each::<ClusterRole>(cluster_roles, |r| policy.add_cluster_role(r));
        each::<ClusterRoleBinding>(cluster_bindings, |b| policy.add_cluster_binding(b));
        policy
    }

    /// The decision for `user` and the request `info` at `path`, with kube's reason.
    pub fn decide(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Decision {
        if exempt(user, info, path) {
            return Decision::Allow(String::new());
        }
        self.policy().decide(&who(user), &attributes(info, path))
    }

    /// Every rule `user` holds in `namespace`.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> Rules {
        self.policy().rules_for(&who(user), namespace)
    }
}

/// Whether the request is allowed whatever the policy says: a superuser's,
/// or one for an always-allowed path.
fn exempt(user: &UserInfo, info: &RequestInfo, path: &str) -> bool {
    user.in_group(SUPERUSERS) || (!info.is_resource_request && always_allowed(path))
}

/// The user as RBAC reads it.
fn who(user: &UserInfo) -> User<'_> {
    User {
        name: &user.name,
        groups: &user.groups,
    }
}

#[async_trait::async_trait]
impl Authorizer for Rbac {
    /// RBAC only allows: what no rule allows it leaves to the next authorizer.
    async fn opinion(&self, user: &UserInfo, info: &RequestInfo, path: &str) -> Result<Opinion> {
        Ok(match self.decide(user, info, path) {
            Decision::Allow(reason) => Opinion::Allow(reason),
            Decision::Deny(reason) => Opinion::NoOpinion(reason),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Storage;
    use crate::storage::memory::MemoryStorage;
    use http::Method;
    use serde_json::json;

    async fn put(storage: &MemoryStorage, key: &str, value: serde_json::Value) {
        storage
            .create(key, serde_json::to_vec(&value).unwrap().into())
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn follows_bindings_through_the_cache() {
        let storage = Arc::new(MemoryStorage::default());
        let cacher = Cacher::start(storage.clone()).await.unwrap();
        let rbac = Rbac::new(&cacher, "/registry").await.unwrap();
        let bob = UserInfo {
            name: "system:serviceaccount:ns:bob".into(),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:authenticated".into(),
            ],
            ..Default::default()
        };
        let path = "/api/v1/namespaces/ns/configmaps";
        let list = RequestInfo::parse(&Method::GET, path, "");
        let denied = rbac.authorize(&bob, &list, path).await.unwrap_err();
        assert_eq!(
            denied.to_string(),
            "configmaps is forbidden: User \"system:serviceaccount:ns:bob\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"ns\""
        );
        put(&storage, "/registry/rbac.authorization.k8s.io/rolebindings/ns/bob-view", json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "bob-view", "namespace": "ns"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "bob", "namespace": "ns"}]
        })).await;
        cacher.wait_fresh().await.unwrap();
        assert_eq!(
            rbac.authorize(&bob, &list, path)
                .await
                .unwrap_err()
                .to_string(),
            "configmaps is forbidden: User \"system:serviceaccount:ns:bob\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"ns\": RBAC: clusterrole.rbac.authorization.k8s.io \"view\" not found"
        );
        put(&storage, "/registry/rbac.authorization.k8s.io/clusterroles/view", json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "view"},
            "rules": [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps"]}]
        })).await;
        cacher.wait_fresh().await.unwrap();
        assert!(rbac.authorize(&bob, &list, path).await.is_ok());
        let create = RequestInfo::parse(&Method::POST, path, "");
        assert!(rbac.authorize(&bob, &create, path).await.is_err());
        let admin = UserInfo {
            name: "admin".into(),
            groups: vec![SUPERUSERS.into()],
            ..Default::default()
        };
        assert!(rbac.authorize(&admin, &create, path).await.is_ok());
        let health = RequestInfo::parse(&Method::GET, "/readyz", "");
        assert!(
            rbac.authorize(&UserInfo::anonymous(), &health, "/readyz")
                .await
                .is_ok()
        );
    }
}
