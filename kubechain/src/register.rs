//! `kubechain register`: adds an aggregated API server to a cluster without
//! hand-written YAML. Given the group, its versions, where the server
//! listens and who it authenticates as, it writes through the front door:
//!
//! - with `--address`, a Service without a selector and its EndpointSlice
//!   (and their Namespace), for a server outside the cluster's network;
//! - an APIService per version, whose `caBundle` is the CA of the server's
//!   serving certificate (never `insecureSkipTLSVerify`);
//! - the RBAC every server built on k8s.io/apiserver (or ours) needs:
//!   `system:auth-delegator` (TokenReviews and SubjectAccessReviews), the
//!   `extension-apiserver-authentication-reader` Role in `kube-system` (the
//!   front-proxy CA and names it trusts), and reads of what such a server
//!   follows (namespaces, admission configuration and the Services its
//!   webhooks name, priority and fairness).
//!
//! Each object is created, or updated where a field it sets differs, or left
//! alone: running it twice changes nothing the second time. `--dry-run=client`
//! prints the objects (`-o yaml` or `json`) and writes nothing.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use base64::Engine;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::client::{Api, Credentials};

/// `kubechain register`'s options.
#[derive(clap::Args, Debug)]
pub struct RegisterArgs {
    /// The API group the server serves, e.g. `wardle.example.com`.
    #[arg(long)]
    group: String,
    /// A version of the group the server serves (repeatable).
    #[arg(long = "version", required = true)]
    versions: Vec<String>,
    /// Where the server listens, `IP:port`, when it runs outside the
    /// cluster's network (repeatable, one per replica): a Service without a
    /// selector and an EndpointSlice with these addresses are written.
    #[arg(long = "address")]
    addresses: Vec<SocketAddr>,
    /// The Service in front of the server, `namespace/name`: written with
    /// `--address`, else it must exist (default `kube-system/<group>` with
    /// dots as dashes).
    #[arg(long)]
    service: Option<String>,
    /// The Service's port (the APIService calls the server there).
    #[arg(long, default_value_t = 443)]
    service_port: u16,
    /// PEM file with the CA that signed the server's serving certificate:
    /// the APIService's `caBundle`.
    #[arg(long)]
    ca_file: PathBuf,
    /// Who the server authenticates to the front door as:
    /// `user:<name>` or `serviceaccount:<namespace>:<name>`.
    #[arg(long)]
    identity: String,
    /// The APIService's `groupPriorityMinimum` (kube's sample's value).
    #[arg(long, default_value_t = 1000)]
    group_priority_minimum: u32,
    /// The APIService's `versionPriority` (kube's sample's value).
    #[arg(long, default_value_t = 15)]
    version_priority: u32,
    /// The admin's kubeconfig (a client certificate).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// `client`: print what would be written and write nothing.
    #[arg(long, value_parser = ["client"])]
    dry_run: Option<String>,
    /// How `--dry-run=client` prints the objects.
    #[arg(short = 'o', long, value_parser = ["yaml", "json"], default_value = "yaml")]
    output: String,
}

/// What registration did to one object, in kubectl apply's words.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It did not exist and was created.
    Created,
    /// It existed and a field registration sets differed.
    Configured,
    /// It existed as registration would write it.
    Unchanged,
}

/// An aggregated API server to register: what `kubechain register` and the
/// launcher (for metrics-server) write from.
pub struct Registration {
    /// The API group the server serves.
    pub group: String,
    /// The versions of the group it serves.
    pub versions: Vec<String>,
    /// The Service in front of it: namespace and name.
    pub service: (String, String),
    /// The Service's port.
    pub service_port: u16,
    /// Where the server listens, when outside the cluster's network.
    pub addresses: Vec<SocketAddr>,
    /// The CA of its serving certificate (PEM).
    pub ca: Vec<u8>,
    /// The RBAC subject it authenticates to the front door as.
    pub subject: Value,
    /// The APIServices' `groupPriorityMinimum`.
    pub group_priority_minimum: u32,
    /// The APIServices' `versionPriority`.
    pub version_priority: u32,
}

/// Runs `kubechain register`.
pub async fn run(args: RegisterArgs) -> Result<()> {
    let registration = Registration::from_args(&args)?;
    let objects = registration.objects()?;
    if args.dry_run.is_some() {
        print!("{}", render(&objects, &args.output)?);
        return Ok(());
    }
    let api = Credentials::from_kubeconfig(&args.kubeconfig, None)?.api()?;
    for (collection, object) in &objects {
        let outcome = ensure(&api, collection, object).await?;
        println!(
            "{} {}",
            display_name(object),
            format!("{outcome:?}").to_lowercase()
        );
    }
    Ok(())
}

impl Registration {
    /// The registration `kubechain register`'s options describe.
    fn from_args(args: &RegisterArgs) -> Result<Registration> {
        let service = match &args.service {
            Some(service) => service
                .split_once('/')
                .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
                .map(|(ns, name)| (ns.to_string(), name.to_string()))
                .context("--service is namespace/name")?,
            None => ("kube-system".to_string(), args.group.replace('.', "-")),
        };
        let ca = std::fs::read(&args.ca_file)
            .with_context(|| format!("reading {}", args.ca_file.display()))?;
        Ok(Registration {
            group: args.group.clone(),
            versions: args.versions.clone(),
            service,
            service_port: args.service_port,
            addresses: args.addresses.clone(),
            ca,
            subject: subject(&args.identity)?,
            group_priority_minimum: args.group_priority_minimum,
            version_priority: args.version_priority,
        })
    }

    /// The objects to write, each with the collection it is written to.
    pub fn objects(&self) -> Result<Vec<(String, Value)>> {
        let group = self.group.as_str();
        let (namespace, service) = (&self.service.0, &self.service.1);
        let subject = &self.subject;
        if !String::from_utf8_lossy(&self.ca).contains("-----BEGIN CERTIFICATE-----") {
            bail!("the CA of {group}'s server holds no PEM certificate");
        }
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&self.ca);
        let labels = json!({"apiregistration.kubechain.io/group": group});
        let mut objects = Vec::new();
        if let Some(first) = self.addresses.first() {
            let port = first.port();
            if self.addresses.iter().any(|a| a.port() != port) {
                bail!("every address of {group}'s server needs the same port");
            }
            objects.push((
                "/api/v1/namespaces".to_string(),
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
            ));
            objects.push((
                format!("/api/v1/namespaces/{namespace}/services"),
                json!({"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": service, "namespace": namespace, "labels": labels},
                       "spec": {"ports": [{"name": "https", "port": self.service_port,
                                           "protocol": "TCP", "targetPort": port}]}}),
            ));
            let address_type = if first.is_ipv6() { "IPv6" } else { "IPv4" };
            let endpoints: Vec<Value> = self
                .addresses
                .iter()
                .map(|a| json!({"addresses": [a.ip().to_string()], "conditions": {"ready": true}}))
                .collect();
            let mut slice_labels = labels.clone();
            slice_labels["kubernetes.io/service-name"] = json!(service);
            objects.push((
                format!("/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"),
                json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                       "metadata": {"name": service, "namespace": namespace, "labels": slice_labels},
                       "addressType": address_type, "endpoints": endpoints,
                       "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}),
            ));
        }
        let rbac = "/apis/rbac.authorization.k8s.io/v1";
        let role_ref = |kind: &str, name: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name});
        let follower = format!("{group}:aggregated-apiserver");
        objects.push((
            format!("{rbac}/clusterroles"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": follower, "labels": labels},
                   "rules": [
                       {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
                       {"apiGroups": ["admissionregistration.k8s.io"],
                        "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations",
                                      "validatingadmissionpolicies", "validatingadmissionpolicybindings"],
                        "verbs": ["get", "list", "watch"]},
                       // Where an admission webhook's Service sends its calls.
                       {"apiGroups": [""], "resources": ["services"], "verbs": ["get"]},
                       {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]},
                       {"apiGroups": ["flowcontrol.apiserver.k8s.io"],
                        "resources": ["flowschemas", "prioritylevelconfigurations"],
                        "verbs": ["get", "list", "watch"]}]}),
        ));
        for (name, role) in [
            (follower.clone(), follower.as_str()),
            (
                format!("{group}:system:auth-delegator"),
                "system:auth-delegator",
            ),
        ] {
            objects.push((
                format!("{rbac}/clusterrolebindings"),
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": name, "labels": labels},
                       "roleRef": role_ref("ClusterRole", role), "subjects": [subject]}),
            ));
        }
        objects.push((
            format!("{rbac}/namespaces/kube-system/rolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": format!("{group}:extension-apiserver-authentication-reader"),
                                "namespace": "kube-system", "labels": labels},
                   "roleRef": role_ref("Role", "extension-apiserver-authentication-reader"),
                   "subjects": [subject]}),
        ));
        for version in &self.versions {
            objects.push((
                "/apis/apiregistration.k8s.io/v1/apiservices".to_string(),
                json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                       "metadata": {"name": format!("{version}.{group}"), "labels": labels},
                       "spec": {"group": group, "version": version, "caBundle": ca_bundle,
                                "groupPriorityMinimum": self.group_priority_minimum,
                                "versionPriority": self.version_priority,
                                "service": {"namespace": namespace, "name": service,
                                            "port": self.service_port}}}),
            ));
        }
        Ok(objects)
    }
}

/// An RBAC subject from `user:<name>` or `serviceaccount:<namespace>:<name>`.
pub fn subject(identity: &str) -> Result<Value> {
    match identity.split(':').collect::<Vec<_>>()[..] {
        ["user", name] if !name.is_empty() => {
            Ok(json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}))
        }
        ["serviceaccount", namespace, name] if !namespace.is_empty() && !name.is_empty() => {
            Ok(json!({"kind": "ServiceAccount", "namespace": namespace, "name": name}))
        }
        _ => bail!(
            "--identity is user:<name> or serviceaccount:<namespace>:<name>, not {identity:?}"
        ),
    }
}

/// `kind.group/name`, as kubectl names what it applied.
fn display_name(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or_default().to_lowercase();
    let group = object["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
        .map(|(group, _)| format!(".{group}"))
        .unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    format!("{kind}{group}/{name}")
}

/// The objects as YAML documents or a JSON List.
fn render(objects: &[(String, Value)], output: &str) -> Result<String> {
    if output == "json" {
        let items: Vec<&Value> = objects.iter().map(|(_, o)| o).collect();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        return Ok(serde_json::to_string_pretty(&list)? + "\n");
    }
    let mut text = String::new();
    for (_, object) in objects {
        text.push_str("---\n");
        text.push_str(&apimachinery::yaml::to_string(object)?);
    }
    Ok(text)
}

/// Creates `object` in `collection`, or updates it where a field it sets
/// differs from what is stored.
pub async fn ensure(api: &Api, collection: &str, object: &Value) -> Result<Outcome> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let path = format!("{collection}/{name}");
    let response = api.send(Method::GET, &path, None).await?;
    match response.status() {
        StatusCode::NOT_FOUND => {
            api.call(
                Method::POST,
                collection,
                Some(object.to_string().into()),
                StatusCode::CREATED,
            )
            .await?;
            Ok(Outcome::Created)
        }
        StatusCode::OK => {
            let current: Value = serde_json::from_slice(&response.bytes().await?)?;
            if covers(&current, object) {
                return Ok(Outcome::Unchanged);
            }
            let mut updated = current;
            overlay(&mut updated, object);
            api.call(
                Method::PUT,
                &path,
                Some(updated.to_string().into()),
                StatusCode::OK,
            )
            .await?;
            Ok(Outcome::Configured)
        }
        status => bail!(
            "GET {path}: {status}: {}",
            response.text().await.unwrap_or_default()
        ),
    }
}

/// Whether `current` holds every field `wanted` sets, with its value (a
/// list must match item by item; the server's defaults are left out).
fn covers(current: &Value, wanted: &Value) -> bool {
    match (current, wanted) {
        (Value::Object(current), Value::Object(wanted)) => wanted
            .iter()
            .all(|(key, value)| current.get(key).is_some_and(|c| covers(c, value))),
        (Value::Array(current), Value::Array(wanted)) => {
            current.len() == wanted.len() && current.iter().zip(wanted).all(|(c, w)| covers(c, w))
        }
        (current, wanted) => current == wanted,
    }
}

/// Writes `wanted`'s fields into `current`: objects member by member, any
/// other value (lists included) replaced.
fn overlay(current: &mut Value, wanted: &Value) {
    match (current, wanted) {
        (Value::Object(current), Value::Object(wanted)) => {
            for (key, value) in wanted {
                match current.get_mut(key) {
                    Some(existing) => overlay(existing, value),
                    None => {
                        current.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (current, wanted) => *current = wanted.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_the_server_adds_do_not_count_as_changes() {
        let wanted = json!({"spec": {"ports": [{"port": 443, "targetPort": 8443}]}});
        let stored = json!({"metadata": {"resourceVersion": "7"}, "spec": {"clusterIP": "10.0.0.1",
            "ports": [{"port": 443, "targetPort": 8443, "protocol": "TCP"}]}});
        assert!(covers(&stored, &wanted));
        let moved = json!({"spec": {"ports": [{"port": 443, "targetPort": 9443}]}});
        assert!(!covers(&stored, &moved));
        let mut updated = stored.clone();
        overlay(&mut updated, &moved);
        assert_eq!(
            updated["spec"]["ports"],
            json!([{"port": 443, "targetPort": 9443}])
        );
        assert_eq!(updated["spec"]["clusterIP"], "10.0.0.1");
        assert_eq!(updated["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn identities_are_users_or_service_accounts() {
        assert_eq!(subject("user:wardle").unwrap()["kind"], "User");
        let account = subject("serviceaccount:wardle:apiserver").unwrap();
        assert_eq!(account["namespace"], "wardle");
        for bad in ["wardle", "user:", "serviceaccount:wardle", "group:x"] {
            assert!(subject(bad).is_err(), "{bad}");
        }
    }
}
