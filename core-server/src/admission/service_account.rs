//! kube's ServiceAccount admission: a pod created without an account runs
//! as `default`; the account must exist (a namespace's `default`, which the
//! service account controller creates just after the namespace, is waited
//! for a little, as kube retries); unless the pod or the account opts out,
//! every container mounts a projected `kube-api-access-<suffix>` volume
//! with a bound token, the cluster CA and the namespace; the account's
//! image pull secrets are copied to a pod without any; an account annotated
//! `kubernetes.io/enforce-mountable-secrets` limits the secrets the pod may
//! use; mirror pods may reference neither accounts nor secrets.

use std::sync::Arc;
use std::time::Duration;

use apimachinery::error::{Error, Result};
use apimachinery::group_version::GroupResource;
use generic_server::admission::{AdmissionPlugin, Attributes, Operation, cached, forbidden};
use generic_server::storage::cacher::{Cacher, ResourceCache};
use serde_json::{Value, json};

use crate::controllers::root_ca_publisher::CONFIG_MAP_NAME as ROOT_CA_CONFIG_MAP;
use crate::resources::fields::{each_mut, is_set, items, text};

/// The account a pod without one runs as.
const DEFAULT_ACCOUNT: &str = "default";
/// How often the `default` account is looked for before the pod is refused
/// (kube's: the controller creates it just after its namespace).
const DEFAULT_ACCOUNT_ATTEMPTS: usize = 10;
/// Where the token volume is mounted.
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The name of the token volume, before its random suffix.
const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";
/// The lifetime the token volume asks for (kube's warn-only bound token lifetime).
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// The annotation marking a mirror pod (one a kubelet made from a static pod).
const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// The annotation with which an account limits the secrets its pods may use.
const ENFORCE_MOUNTABLE_SECRETS: &str = "kubernetes.io/enforce-mountable-secrets";
/// The container lists of a pod spec, as kube mounts the token: init containers first.
const CONTAINER_LISTS: [&str; 2] = ["initContainers", "containers"];

/// kube's ServiceAccount admission plugin, reading accounts from the watch cache.
pub struct ServiceAccount {
    cacher: Arc<Cacher>,
    accounts: Arc<ResourceCache>,
}

impl ServiceAccount {
    /// Follows ServiceAccounts through the server's cache.
    pub async fn new(cacher: Arc<Cacher>, etcd_root: &str) -> Result<Self> {
        let accounts = super::watch(&cacher, etcd_root, "", "serviceaccounts").await?;
        Ok(ServiceAccount { cacher, accounts })
    }

    /// The account `name` in the write's namespace, or kube's refusal. A
    /// missing `default` account is looked for again (every 100 to 200 ms,
    /// ten times in all), as the controller creates it just after the
    /// namespace.
    async fn account(&self, attrs: &Attributes<'_>, name: &str) -> Result<Value> {
        let key = format!("{}/{name}", attrs.namespace);
        let attempts = if name == DEFAULT_ACCOUNT {
            DEFAULT_ACCOUNT_ATTEMPTS
        } else {
            1
        };
        let interval = Duration::from_millis(rand::random_range(100..200));
        let refused = |why: String| {
            forbidden(
                attrs,
                &format!(
                    "error looking up service account {}/{name}: {why}",
                    attrs.namespace
                ),
            )
        };
        for attempt in 0..attempts {
            if attempt > 0 {
                tokio::time::sleep(interval).await;
            }
            match cached(&self.cacher, &self.accounts, &key).await {
                Ok(Some(found)) => return Ok(found.value()),
                Ok(None) => {}
                Err(e) => return Err(refused(e.to_string())),
            }
        }
        let missing = Error::NotFound {
            resource: GroupResource::new("", "serviceaccount"),
            name: name.into(),
        };
        Err(refused(missing.to_string()))
    }
}

#[async_trait::async_trait]
impl AdmissionPlugin for ServiceAccount {
    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<()> {
        if !super::writes(attrs, "", "pods") || attrs.operation != Operation::Create {
            return Ok(());
        }
        // A mirror pod is never changed (the kubelet would delete it); the
        // validating step checks what it references.
        if is_mirror_pod(obj) {
            return Ok(());
        }
        let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
            return Ok(());
        };
        let name = match text(spec, "/serviceAccountName") {
            "" => DEFAULT_ACCOUNT.to_string(),
            name => name.to_string(),
        };
        spec["serviceAccountName"] = json!(name);
        spec["serviceAccount"] = json!(name);
        let account = self.account(attrs, &name).await?;
        if automounts(spec, &account) {
            mount_token(spec);
        }
        let pull_secrets = items(&account, "/imagePullSecrets");
        if items(spec, "/imagePullSecrets").is_empty() && !pull_secrets.is_empty() {
            let names: Vec<Value> = pull_secrets
                .iter()
                .map(|s| json!({"name": text(s, "/name")}))
                .collect();
            spec["imagePullSecrets"] = Value::Array(names);
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: Option<&Value>) -> Result<()> {
        if !super::writes(attrs, "", "pods") || attrs.operation != Operation::Create {
            return Ok(());
        }
        let Some(pod) = obj else { return Ok(()) };
        let spec = pod.get("spec").unwrap_or(&Value::Null);
        if is_mirror_pod(pod) {
            return mirror_pod_references(spec).map_err(|why| forbidden(attrs, why));
        }
        let name = text(spec, "/serviceAccountName");
        if name.is_empty() {
            return Err(forbidden(
                attrs,
                &format!(
                    "no service account specified for pod {}/{}",
                    attrs.namespace, attrs.name
                ),
            ));
        }
        let account = self.account(attrs, name).await?;
        if enforces_mountable_secrets(&account) {
            unmountable_secret(spec, &account).map_or(Ok(()), |why| Err(forbidden(attrs, &why)))?;
        }
        Ok(())
    }
}

fn is_mirror_pod(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION))
}

/// Whether the token is mounted: the pod's choice, else the account's, else yes.
fn automounts(spec: &Value, account: &Value) -> bool {
    [spec, account]
        .iter()
        .find_map(|o| {
            o.get("automountServiceAccountToken")
                .and_then(Value::as_bool)
        })
        .unwrap_or(true)
}

/// The projected volume kube mounts: a bound token, the cluster CA (the
/// ConfigMap the root CA publisher keeps in every namespace), the namespace.
fn token_volume(name: &str) -> Value {
    json!({"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
        {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}})
}

/// Appends `value` to the array `field` of the object `obj` (made an array if it is not one).
fn push(obj: &mut Value, field: &str, value: Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let list = map.entry(field).or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    if let Some(list) = list.as_array_mut() {
        list.push(value);
    }
}

/// Mounts the token volume (an existing `kube-api-access-` volume, or a new
/// one) read-only in every container that mounts nothing at its path.
fn mount_token(spec: &mut Value) {
    let existing = items(spec, "/volumes")
        .iter()
        .map(|v| text(v, "/name"))
        .find(|name| name.starts_with(TOKEN_VOLUME_PREFIX))
        .map(str::to_string);
    let name = existing.clone().unwrap_or_else(|| {
        format!(
            "{TOKEN_VOLUME_PREFIX}{}",
            generic_server::registry::random_suffix()
        )
    });
    let mount = json!({"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    let mut mounted = false;
    for list in CONTAINER_LISTS {
        each_mut(spec, &format!("/{list}"), |container| {
            let has_mount = items(container, "/volumeMounts")
                .iter()
                .any(|m| text(m, "/mountPath") == TOKEN_MOUNT_PATH);
            if !has_mount && container.is_object() {
                push(container, "volumeMounts", mount.clone());
                mounted = true;
            }
        });
    }
    if existing.is_none() && mounted {
        push(spec, "volumes", token_volume(&name));
    }
}

/// Whether the account asks that its pods use only the secrets it lists
/// (the annotation read as Go's `strconv.ParseBool` reads it).
fn enforces_mountable_secrets(account: &Value) -> bool {
    let annotation = format!(
        "/metadata/annotations/{}",
        crate::resources::fields::escape(ENFORCE_MOUNTABLE_SECRETS)
    );
    matches!(
        text(account, &annotation),
        "1" | "t" | "T" | "true" | "TRUE" | "True"
    )
}

/// The first secret the pod uses that the account does not list, as kube
/// words the refusal.
fn unmountable_secret(spec: &Value, account: &Value) -> Option<String> {
    let listed = |list: &str, name: &str| {
        items(account, list)
            .iter()
            .any(|s| text(s, "/name") == name)
    };
    let sa = text(account, "/metadata/name");
    for volume in items(spec, "/volumes") {
        let secret = text(volume, "/secret/secretName");
        if is_set(volume, "/secret") && !listed("/secrets", secret) {
            return Some(format!(
                "volume with secret.secretName=\"{secret}\" is not allowed because service account {sa} does not reference that secret"
            ));
        }
    }
    for (list, what) in [
        ("initContainers", "init container"),
        ("containers", "container"),
    ] {
        for container in items(spec, &format!("/{list}")) {
            let c = text(container, "/name");
            for env in items(container, "/env") {
                let secret = text(env, "/valueFrom/secretKeyRef/name");
                if is_set(env, "/valueFrom/secretKeyRef") && !listed("/secrets", secret) {
                    let var = text(env, "/name");
                    return Some(format!(
                        "{what} {c} with envVar {var} referencing secret.secretName=\"{secret}\" is not allowed because service account {sa} does not reference that secret"
                    ));
                }
            }
            for from in items(container, "/envFrom") {
                let secret = text(from, "/secretRef/name");
                if is_set(from, "/secretRef") && !listed("/secrets", secret) {
                    return Some(format!(
                        "{what} {c} with envFrom referencing secret.secretName=\"{secret}\" is not allowed because service account {sa} does not reference that secret"
                    ));
                }
            }
        }
    }
    for (i, pull) in items(spec, "/imagePullSecrets").iter().enumerate() {
        let secret = text(pull, "/name");
        if !listed("/imagePullSecrets", secret) {
            return Some(format!(
                "imagePullSecrets[{i}].name=\"{secret}\" is not allowed because service account {sa} does not reference that imagePullSecret"
            ));
        }
    }
    None
}

/// The volume sources that name a secret (kube's `VisitPodSecretNames`).
const SECRET_VOLUME_REFERENCES: &[&str] = &[
    "/secret/secretName",
    "/azureFile/secretName",
    "/cephfs/secretRef",
    "/cinder/secretRef",
    "/flexVolume/secretRef",
    "/rbd/secretRef",
    "/scaleIO/secretRef",
    "/iscsi/secretRef",
    "/storageos/secretRef",
    "/csi/nodePublishSecretRef",
];

/// What a mirror pod may not reference: an account, a secret, a token projection.
fn mirror_pod_references(spec: &Value) -> std::result::Result<(), &'static str> {
    if !text(spec, "/serviceAccountName").is_empty() {
        return Err("a mirror pod may not reference service accounts");
    }
    let container_secrets = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|list| items(spec, &format!("/{list}")))
        .any(|c| {
            items(c, "/env")
                .iter()
                .any(|e| is_set(e, "/valueFrom/secretKeyRef"))
                || items(c, "/envFrom").iter().any(|e| is_set(e, "/secretRef"))
        });
    let volumes = items(spec, "/volumes");
    let projections = || volumes.iter().flat_map(|v| items(v, "/projected/sources"));
    let volume_secrets = volumes
        .iter()
        .any(|v| SECRET_VOLUME_REFERENCES.iter().any(|p| is_set(v, p)))
        || projections().any(|s| is_set(s, "/secret"));
    if !items(spec, "/imagePullSecrets").is_empty() || container_secrets || volume_secrets {
        return Err("a mirror pod may not reference secrets");
    }
    if projections().any(|s| is_set(s, "/serviceAccountToken")) {
        return Err("a mirror pod may not use ServiceAccountToken volume projections");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(containers: Value) -> Value {
        json!({"containers": containers, "initContainers": [{"name": "init", "image": "busybox"}]})
    }

    #[test]
    fn the_token_is_mounted_in_every_container_without_a_mount_there() {
        let mut s = spec(json!([
            {"name": "a", "image": "nginx"},
            {"name": "b", "image": "nginx", "volumeMounts": [{"name": "mine", "mountPath": TOKEN_MOUNT_PATH}]},
        ]));
        mount_token(&mut s);
        let volume = &s["volumes"][0];
        let name = text(volume, "/name");
        assert!(
            name.starts_with(TOKEN_VOLUME_PREFIX) && name.len() == TOKEN_VOLUME_PREFIX.len() + 5
        );
        assert_eq!(volume, &token_volume(name));
        let mount = json!([{"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}]);
        assert_eq!(s["initContainers"][0]["volumeMounts"], mount);
        assert_eq!(s["containers"][0]["volumeMounts"], mount);
        assert_eq!(s["containers"][1]["volumeMounts"][0]["name"], "mine");
        assert_eq!(
            s["containers"][1]["volumeMounts"].as_array().map(Vec::len),
            Some(1)
        );
        // Mounting again reuses the volume rather than adding a second one.
        s["containers"][0]["volumeMounts"] = json!([]);
        mount_token(&mut s);
        assert_eq!(s["volumes"].as_array().map(Vec::len), Some(1));
        assert_eq!(s["containers"][0]["volumeMounts"], mount);
    }

    #[test]
    fn no_volume_when_every_container_has_its_own_mount() {
        let mut s = json!({"containers": [{"name": "a", "volumeMounts": [{"name": "x", "mountPath": TOKEN_MOUNT_PATH}]}]});
        mount_token(&mut s);
        assert!(s.get("volumes").is_none());
    }

    #[test]
    fn the_pod_decides_automounting_before_the_account() {
        let (on, off) = (
            json!({"automountServiceAccountToken": true}),
            json!({"automountServiceAccountToken": false}),
        );
        assert!(automounts(&json!({}), &json!({})));
        assert!(!automounts(&json!({}), &off));
        assert!(automounts(&on, &off));
        assert!(!automounts(&off, &on));
    }

    #[test]
    fn mountable_secrets_are_enforced_with_kubes_words() {
        let account = json!({"metadata": {"name": "robot", "annotations": {ENFORCE_MOUNTABLE_SECRETS: "true"}},
            "secrets": [{"name": "ok"}], "imagePullSecrets": [{"name": "pull"}]});
        assert!(enforces_mountable_secrets(&account));
        assert!(!enforces_mountable_secrets(
            &json!({"metadata": {"annotations": {ENFORCE_MOUNTABLE_SECRETS: "no"}}})
        ));
        let fine = json!({"volumes": [{"name": "v", "secret": {"secretName": "ok"}}], "imagePullSecrets": [{"name": "pull"}],
            "containers": [{"name": "c", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "ok", "key": "k"}}}]}]});
        assert_eq!(unmountable_secret(&fine, &account), None);
        let volume = json!({"volumes": [{"name": "v", "secret": {"secretName": "other"}}]});
        assert_eq!(
            unmountable_secret(&volume, &account).as_deref(),
            Some(
                "volume with secret.secretName=\"other\" is not allowed because service account robot does not reference that secret"
            )
        );
        let env = json!({"initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "other"}}]}]});
        assert_eq!(
            unmountable_secret(&env, &account).as_deref(),
            Some(
                "init container i with envFrom referencing secret.secretName=\"other\" is not allowed because service account robot does not reference that secret"
            )
        );
        let pull = json!({"imagePullSecrets": [{"name": "pull"}, {"name": "other"}]});
        assert_eq!(
            unmountable_secret(&pull, &account).as_deref(),
            Some(
                "imagePullSecrets[1].name=\"other\" is not allowed because service account robot does not reference that imagePullSecret"
            )
        );
    }

    #[test]
    fn mirror_pods_reference_no_account_secret_or_token() {
        assert_eq!(
            mirror_pod_references(&json!({"containers": [{"name": "c"}]})),
            Ok(())
        );
        assert_eq!(
            mirror_pod_references(&json!({"serviceAccountName": "default"})),
            Err("a mirror pod may not reference service accounts")
        );
        assert_eq!(
            mirror_pod_references(
                &json!({"volumes": [{"name": "v", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "s"}}}]})
            ),
            Err("a mirror pod may not reference secrets")
        );
        assert_eq!(
            mirror_pod_references(&json!({"volumes": [token_volume("kube-api-access-x")]})),
            Err("a mirror pod may not use ServiceAccountToken volume projections")
        );
        assert!(is_mirror_pod(
            &json!({"metadata": {"annotations": {MIRROR_POD_ANNOTATION: "x"}}})
        ));
    }
}
