//! The Node authorizer's graph (kube's `plugin/pkg/auth/authorizer/node/graph.go`):
//! which node each scheduled pod is bound to and what the pod references
//! (secrets, config maps, claims, its service account), which claim each
//! persistent volume is bound to and which secrets it names, and which node
//! each volume attachment is for. Every change costs the object's own
//! references; every question a few map lookups.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An object a pod may reference, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Kind {
    /// A Secret.
    Secret,
    /// A ConfigMap.
    ConfigMap,
    /// A PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// A ServiceAccount.
    ServiceAccount,
}

/// A namespaced object a pod references.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Reference {
    /// Its kind.
    pub kind: Kind,
    /// Its name (in the pod's namespace).
    pub name: String,
}

/// What the graph keeps of a pod: the node it is bound to and what it references.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodEdges {
    /// `spec.nodeName` (empty: not scheduled, so related to no node).
    #[serde(rename = "nodeName", default)]
    pub node: String,
    /// The objects it references, each once.
    #[serde(default)]
    pub references: BTreeSet<Reference>,
}

impl PodEdges {
    /// The edges of a pod object, read as kube's graph populator reads them:
    /// image pull secrets, every container's (init and ephemeral ones too)
    /// `env` and `envFrom` references, volumes (secret, configMap,
    /// projected sources, the secret refs of volume plugins, claims and
    /// ephemeral claims), and its service account.
    pub fn of(pod: &Value) -> PodEdges {
        let text = |v: &Value, path: &str| {
            v.pointer(path)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let spec = &pod["spec"];
        let mut references = BTreeSet::new();
        let mut add = |kind: Kind, name: Option<String>| {
            if let Some(name) = name {
                references.insert(Reference { kind, name });
            }
        };
        let each = |v: &Value| v.as_array().cloned().unwrap_or_default();
        for secret in each(&spec["imagePullSecrets"]) {
            add(Kind::Secret, text(&secret, "/name"));
        }
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            for container in each(&spec[list]) {
                for from in each(&container["envFrom"]) {
                    add(Kind::Secret, text(&from, "/secretRef/name"));
                    add(Kind::ConfigMap, text(&from, "/configMapRef/name"));
                }
                for env in each(&container["env"]) {
                    add(Kind::Secret, text(&env, "/valueFrom/secretKeyRef/name"));
                    add(
                        Kind::ConfigMap,
                        text(&env, "/valueFrom/configMapKeyRef/name"),
                    );
                }
            }
        }
        let pod_name = text(pod, "/metadata/name").unwrap_or_default();
        for volume in each(&spec["volumes"]) {
            add(Kind::Secret, text(&volume, "/secret/secretName"));
            add(Kind::ConfigMap, text(&volume, "/configMap/name"));
            for source in each(&volume["projected"]["sources"]) {
                add(Kind::Secret, text(&source, "/secret/name"));
                add(Kind::ConfigMap, text(&source, "/configMap/name"));
            }
            add(Kind::Secret, text(&volume, "/azureFile/secretName"));
            add(
                Kind::Secret,
                text(&volume, "/csi/nodePublishSecretRef/name"),
            );
            for plugin in SECRET_REF_PLUGINS {
                add(
                    Kind::Secret,
                    text(&volume, &format!("/{plugin}/secretRef/name")),
                );
            }
            add(
                Kind::PersistentVolumeClaim,
                text(&volume, "/persistentVolumeClaim/claimName"),
            );
            // A generic ephemeral volume's claim is named after the pod and the volume.
            if let (Some(_), Some(volume_name)) = (volume.get("ephemeral"), text(&volume, "/name"))
            {
                add(
                    Kind::PersistentVolumeClaim,
                    Some(format!("{pod_name}-{volume_name}")),
                );
            }
        }
        add(Kind::ServiceAccount, text(spec, "/serviceAccountName"));
        PodEdges {
            node: text(spec, "/nodeName").unwrap_or_default(),
            references,
        }
    }
}

/// Volume plugins whose source names a secret in `secretRef`.
const SECRET_REF_PLUGINS: [&str; 7] = [
    "cephfs",
    "cinder",
    "flexVolume",
    "iscsi",
    "rbd",
    "scaleIO",
    "storageos",
];

/// What the graph keeps of a persistent volume: the claim it is bound to
/// and the secrets it names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PvEdges {
    /// `spec.claimRef` as (namespace, name).
    #[serde(default)]
    pub claim: Option<(String, String)>,
    /// The secrets its source names, as (namespace, name).
    #[serde(default)]
    pub secrets: BTreeSet<(String, String)>,
}

impl PvEdges {
    /// The edges of a persistent volume object: its claim, and the secrets
    /// of its CSI source and of the volume plugins that name one (a ref
    /// without a namespace is in the claim's, as kube reads it).
    pub fn of(pv: &Value) -> PvEdges {
        let text = |v: &Value, path: &str| {
            v.pointer(path)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let spec = &pv["spec"];
        let claim = text(spec, "/claimRef/name")
            .map(|name| (text(spec, "/claimRef/namespace").unwrap_or_default(), name));
        let default_namespace = claim
            .as_ref()
            .map(|(ns, _)| ns.clone())
            .unwrap_or_else(|| "default".into());
        let mut secrets = BTreeSet::new();
        let mut add = |reference: &Value| {
            if let Some(name) = text(reference, "/name") {
                let namespace =
                    text(reference, "/namespace").unwrap_or_else(|| default_namespace.clone());
                secrets.insert((namespace, name));
            }
        };
        for field in [
            "nodePublishSecretRef",
            "controllerPublishSecretRef",
            "nodeStageSecretRef",
            "controllerExpandSecretRef",
            "nodeExpandSecretRef",
        ] {
            add(&spec["csi"][field]);
        }
        for plugin in SECRET_REF_PLUGINS {
            add(&spec[plugin]["secretRef"]);
        }
        if let Some(name) = text(spec, "/azureFile/secretName") {
            let namespace = text(spec, "/azureFile/secretNamespace")
                .unwrap_or_else(|| default_namespace.clone());
            secrets.insert((namespace, name));
        }
        PvEdges { claim, secrets }
    }
}

/// A namespaced name.
type Key = (String, String);

/// The relationships between nodes and the objects their pods use.
#[derive(Debug, Default)]
pub struct Graph {
    /// Scheduled pods by (namespace, name).
    pods: HashMap<Key, PodEdges>,
    /// For each referenced object (kind, namespace, name): how many pods on each node reference it.
    used: HashMap<(Kind, String, String), HashMap<String, usize>>,
    /// Persistent volumes by name.
    volumes: HashMap<String, PvEdges>,
    /// For each secret, the persistent volumes naming it.
    volumes_by_secret: HashMap<Key, BTreeSet<String>>,
    /// Volume attachments by name: the node each is for.
    attachments: HashMap<String, String>,
}

/// What a node may ask about, for [`Graph::related`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vertex {
    /// A Pod.
    Pod,
    /// A Secret.
    Secret,
    /// A ConfigMap.
    ConfigMap,
    /// A PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// A PersistentVolume (cluster-scoped).
    PersistentVolume,
    /// A ServiceAccount.
    ServiceAccount,
    /// A VolumeAttachment (cluster-scoped).
    VolumeAttachment,
}

impl Graph {
    /// Sets (or, with `None` or an unscheduled pod, removes) the pod `namespace/name`.
    pub fn set_pod(&mut self, namespace: &str, name: &str, edges: Option<PodEdges>) {
        let key = (namespace.to_string(), name.to_string());
        let edges = edges.filter(|e| !e.node.is_empty());
        if self.pods.get(&key) == edges.as_ref() {
            return;
        }
        if let Some(old) = self.pods.remove(&key) {
            for reference in &old.references {
                let used_key = (reference.kind, key.0.clone(), reference.name.clone());
                if let Some(nodes) = self.used.get_mut(&used_key) {
                    if let Some(count) = nodes.get_mut(&old.node) {
                        *count -= 1;
                        if *count == 0 {
                            nodes.remove(&old.node);
                        }
                    }
                    if nodes.is_empty() {
                        self.used.remove(&used_key);
                    }
                }
            }
        }
        if let Some(edges) = edges {
            for reference in &edges.references {
                *self
                    .used
                    .entry((reference.kind, key.0.clone(), reference.name.clone()))
                    .or_default()
                    .entry(edges.node.clone())
                    .or_default() += 1;
            }
            self.pods.insert(key, edges);
        }
    }

    /// Sets (or, with `None`, removes) the persistent volume `name`.
    pub fn set_volume(&mut self, name: &str, edges: Option<PvEdges>) {
        if let Some(old) = self.volumes.remove(name) {
            for secret in &old.secrets {
                if let Some(volumes) = self.volumes_by_secret.get_mut(secret) {
                    volumes.remove(name);
                    if volumes.is_empty() {
                        self.volumes_by_secret.remove(secret);
                    }
                }
            }
        }
        if let Some(edges) = edges {
            for secret in &edges.secrets {
                self.volumes_by_secret
                    .entry(secret.clone())
                    .or_default()
                    .insert(name.to_string());
            }
            self.volumes.insert(name.to_string(), edges);
        }
    }

    /// Sets (or, with `None` or no node, removes) the volume attachment `name`.
    pub fn set_attachment(&mut self, name: &str, node: Option<String>) {
        match node.filter(|n| !n.is_empty()) {
            Some(node) => self.attachments.insert(name.to_string(), node),
            None => self.attachments.remove(name),
        };
    }

    /// Forgets every pod.
    pub fn clear_pods(&mut self) {
        self.pods.clear();
        self.used.clear();
    }

    /// Forgets every persistent volume.
    pub fn clear_volumes(&mut self) {
        self.volumes.clear();
        self.volumes_by_secret.clear();
    }

    /// Forgets every volume attachment.
    pub fn clear_attachments(&mut self) {
        self.attachments.clear();
    }

    /// Whether some pod bound to `node` references the object.
    fn used_on(&self, kind: Kind, namespace: &str, name: &str, node: &str) -> bool {
        self.used
            .get(&(kind, namespace.to_string(), name.to_string()))
            .is_some_and(|nodes| nodes.contains_key(node))
    }

    /// Whether the persistent volume `name` is bound to a claim a pod on `node` uses.
    fn volume_on(&self, name: &str, node: &str) -> bool {
        self.volumes
            .get(name)
            .and_then(|v| v.claim.as_ref())
            .is_some_and(|(ns, claim)| self.used_on(Kind::PersistentVolumeClaim, ns, claim, node))
    }

    /// Whether there is a path from the object to `node` (kube's
    /// `hasPathFrom`): a pod bound to it, an object such a pod references,
    /// a volume bound to such a claim or a secret such a volume names, an
    /// attachment for it.
    pub fn related(&self, node: &str, vertex: Vertex, namespace: &str, name: &str) -> bool {
        match vertex {
            Vertex::Pod => self
                .pods
                .get(&(namespace.to_string(), name.to_string()))
                .is_some_and(|p| p.node == node),
            Vertex::Secret => {
                self.used_on(Kind::Secret, namespace, name, node)
                    || self
                        .volumes_by_secret
                        .get(&(namespace.to_string(), name.to_string()))
                        .is_some_and(|volumes| volumes.iter().any(|v| self.volume_on(v, node)))
            }
            Vertex::ConfigMap => self.used_on(Kind::ConfigMap, namespace, name, node),
            Vertex::PersistentVolumeClaim => {
                self.used_on(Kind::PersistentVolumeClaim, namespace, name, node)
            }
            Vertex::ServiceAccount => self.used_on(Kind::ServiceAccount, namespace, name, node),
            Vertex::PersistentVolume => self.volume_on(name, node),
            Vertex::VolumeAttachment => self.attachments.get(name).is_some_and(|n| n == node),
        }
    }

    /// How many pods and referenced objects the graph holds (for tests and metrics).
    pub fn size(&self) -> (usize, usize) {
        (self.pods.len(), self.used.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {
            "nodeName": node, "serviceAccountName": "runner",
            "imagePullSecrets": [{"name": "pull"}],
            "containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "env-secret"}}, {"configMapRef": {"name": "env-cm"}}],
                "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "key-secret", "key": "k"}}},
                        {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "key-cm", "key": "k"}}}]}],
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "init-secret"}}]}],
            "volumes": [{"name": "s", "secret": {"secretName": "vol-secret"}},
                        {"name": "c", "configMap": {"name": "vol-cm"}},
                        {"name": "p", "projected": {"sources": [{"secret": {"name": "proj-secret"}}, {"configMap": {"name": "proj-cm"}}, {"serviceAccountToken": {"path": "t"}}]}},
                        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                        {"name": "r", "rbd": {"monitors": ["m"], "image": "i", "secretRef": {"name": "rbd-secret"}}},
                        {"name": "e", "emptyDir": {}}]}})
    }

    #[test]
    fn a_pod_names_everything_it_references() {
        let edges = PodEdges::of(&pod("web", "n1"));
        assert_eq!(edges.node, "n1");
        let names = |kind: Kind| {
            edges
                .references
                .iter()
                .filter(|r| r.kind == kind)
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(Kind::Secret),
            [
                "env-secret",
                "init-secret",
                "key-secret",
                "proj-secret",
                "pull",
                "rbd-secret",
                "vol-secret"
            ]
        );
        assert_eq!(
            names(Kind::ConfigMap),
            ["env-cm", "key-cm", "proj-cm", "vol-cm"]
        );
        assert_eq!(names(Kind::PersistentVolumeClaim), ["data", "web-scratch"]);
        assert_eq!(names(Kind::ServiceAccount), ["runner"]);
    }

    #[test]
    fn objects_are_related_only_to_the_node_of_a_pod_using_them() {
        let mut graph = Graph::default();
        graph.set_pod("ns", "web", Some(PodEdges::of(&pod("web", "n1"))));
        assert!(graph.related("n1", Vertex::Pod, "ns", "web"));
        assert!(graph.related("n1", Vertex::Secret, "ns", "vol-secret"));
        assert!(graph.related("n1", Vertex::ConfigMap, "ns", "proj-cm"));
        assert!(graph.related("n1", Vertex::ServiceAccount, "ns", "runner"));
        assert!(!graph.related("n2", Vertex::Secret, "ns", "vol-secret"));
        assert!(!graph.related("n2", Vertex::Pod, "ns", "web"));
        assert!(!graph.related("n1", Vertex::Secret, "other", "vol-secret"));
        assert!(!graph.related("n1", Vertex::Secret, "ns", "vol-cm"));
        // A second pod on another node sharing a secret; the first one moves away.
        graph.set_pod("ns", "api", Some(PodEdges::of(&pod("api", "n2"))));
        assert!(graph.related("n2", Vertex::Secret, "ns", "pull"));
        graph.set_pod("ns", "web", None);
        assert!(!graph.related("n1", Vertex::Secret, "ns", "pull"));
        assert!(graph.related("n2", Vertex::Secret, "ns", "pull"));
        graph.set_pod("ns", "api", Some(PodEdges::of(&pod("api", ""))));
        assert_eq!(graph.size(), (0, 0), "an unscheduled pod relates nothing");
    }

    #[test]
    fn a_volume_is_related_through_its_claim_and_relates_its_secrets() {
        let mut graph = Graph::default();
        let pv = json!({"metadata": {"name": "pv1"}, "spec": {
            "claimRef": {"namespace": "ns", "name": "data"},
            "csi": {"driver": "d", "volumeHandle": "h", "nodePublishSecretRef": {"name": "csi-secret", "namespace": "storage"},
                    "nodeStageSecretRef": {"name": "stage-secret"}}}});
        let edges = PvEdges::of(&pv);
        assert_eq!(edges.claim, Some(("ns".into(), "data".into())));
        assert!(
            edges
                .secrets
                .contains(&("ns".into(), "stage-secret".into()))
        );
        graph.set_volume("pv1", Some(edges));
        assert!(!graph.related("n1", Vertex::PersistentVolume, "", "pv1"));
        assert!(!graph.related("n1", Vertex::Secret, "storage", "csi-secret"));
        graph.set_pod("ns", "web", Some(PodEdges::of(&pod("web", "n1"))));
        assert!(graph.related("n1", Vertex::PersistentVolumeClaim, "ns", "data"));
        assert!(graph.related("n1", Vertex::PersistentVolume, "", "pv1"));
        assert!(graph.related("n1", Vertex::Secret, "storage", "csi-secret"));
        assert!(!graph.related("n2", Vertex::Secret, "storage", "csi-secret"));
        graph.set_volume("pv1", None);
        assert!(!graph.related("n1", Vertex::Secret, "storage", "csi-secret"));
        graph.set_attachment("va1", Some("n1".into()));
        assert!(graph.related("n1", Vertex::VolumeAttachment, "", "va1"));
        assert!(!graph.related("n2", Vertex::VolumeAttachment, "", "va1"));
        graph.set_attachment("va1", None);
        assert!(!graph.related("n1", Vertex::VolumeAttachment, "", "va1"));
    }
}
