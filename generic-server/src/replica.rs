//! Cluster objects an aggregated server follows through the front door
//! (admission configuration, namespaces, priority and fairness), replicated
//! into memory storage under the chain's keys, so that what follows them
//! through a [`Cacher`](crate::storage::cacher::Cacher) (admission
//! webhooks, ValidatingAdmissionPolicies, namespaceSelectors, FlowSchemas)
//! works there as in the chain's own servers. Each resource is listed, then watched from the
//! list's resourceVersion; a watch that ends is resumed from its last
//! resourceVersion, and one that fails (410 Gone, the front door away)
//! starts over with a list after a pause, as kube's reflectors do. While
//! the front door is away the last copy is kept.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

use crate::admission::{AdmissionPlugin, Attributes};
use crate::filters::delegated::FrontDoor;
use crate::health::HealthCheck;
use crate::storage::Storage;
use crate::storage::memory::MemoryStorage;
use crate::watch_event;
use apimachinery::error::{Error, Result};

/// The key root of replicated objects (in the replica's own storage).
pub const ROOT: &str = "/registry";

/// How long one watch of the front door lasts before it is resumed.
const WATCH_SECONDS: u64 = 240;
/// The pause before a failed list or watch starts over.
const RETRY: Duration = Duration::from_secs(1);
/// How long a write waits for the replica's first list before admission
/// refuses it (kube's webhook plugins' `WaitForReady`).
const READY_WAIT: Duration = Duration::from_secs(10);

/// A resource followed through the front door.
#[derive(Debug, Clone, Copy)]
pub struct Followed {
    /// Its group (`""` for core).
    pub group: &'static str,
    /// The version it is read in.
    pub version: &'static str,
    /// Its plural.
    pub plural: &'static str,
}

impl Followed {
    /// Its collection's path at the front door.
    fn path(&self) -> String {
        match self.group {
            "" => format!("/api/{}/{}", self.version, self.plural),
            group => format!("/apis/{group}/{}/{}", self.version, self.plural),
        }
    }
}

/// What admission of an aggregated resource reads: the cluster's webhook
/// configurations, ValidatingAdmissionPolicies and their bindings, and
/// namespaces (for namespaceSelectors and `namespaceObject`).
pub const ADMISSION: &[Followed] = &[
    Followed {
        group: "admissionregistration.k8s.io",
        version: "v1",
        plural: "mutatingwebhookconfigurations",
    },
    Followed {
        group: "admissionregistration.k8s.io",
        version: "v1",
        plural: "validatingwebhookconfigurations",
    },
    Followed {
        group: "admissionregistration.k8s.io",
        version: "v1",
        plural: "validatingadmissionpolicies",
    },
    Followed {
        group: "admissionregistration.k8s.io",
        version: "v1",
        plural: "validatingadmissionpolicybindings",
    },
    Followed {
        group: "",
        version: "v1",
        plural: "namespaces",
    },
];

/// What priority and fairness classifies requests by: FlowSchemas and
/// PriorityLevelConfigurations.
pub const FLOW_CONTROL: &[Followed] = &[
    Followed {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1",
        plural: "flowschemas",
    },
    Followed {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1",
        plural: "prioritylevelconfigurations",
    },
];

/// The followed resources' objects, kept in memory storage.
#[derive(Clone)]
pub struct Replica {
    storage: Arc<dyn Storage>,
    /// How many resources have been listed at least once.
    listed: Arc<AtomicUsize>,
    followed: usize,
}

impl Replica {
    /// Starts following `followed` through `front_door`.
    pub fn start(front_door: Arc<FrontDoor>, followed: &[Followed]) -> Replica {
        let replica = Replica {
            storage: Arc::new(MemoryStorage::default()),
            listed: Arc::new(AtomicUsize::new(0)),
            followed: followed.len(),
        };
        for resource in followed {
            let follower = Follower {
                front_door: front_door.clone(),
                storage: replica.storage.clone(),
                resource: *resource,
                prefix: apimachinery::keys::key_prefix(ROOT, resource.group, resource.plural),
            };
            let listed = replica.listed.clone();
            tokio::spawn(async move { follower.run(listed).await });
        }
        replica
    }

    /// The storage the objects are replicated into, under [`ROOT`].
    pub fn storage(&self) -> Arc<dyn Storage> {
        self.storage.clone()
    }

    /// Whether every followed resource has been listed once.
    pub fn synced(&self) -> bool {
        self.listed.load(Ordering::Acquire) >= self.followed
    }

    /// A `/readyz` check: failing until every resource has been listed.
    pub fn check(&self) -> HealthCheck {
        let replica = self.clone();
        Arc::new(move || {
            let synced = replica.synced();
            Box::pin(async move {
                match synced {
                    true => Ok(()),
                    false => Err(crate::Error::Unavailable(
                        "the cluster's configuration (admission, priority and fairness) is not read yet".into(),
                    )),
                }
            })
        })
    }

    /// `plugin`, refusing writes (403, kube's "not yet ready to handle
    /// request") while the replica has not been listed within 10 s.
    pub fn guard(&self, plugin: Arc<dyn AdmissionPlugin>) -> Arc<dyn AdmissionPlugin> {
        Arc::new(Guarded {
            replica: self.clone(),
            plugin,
        })
    }

    async fn ready(&self, attrs: &Attributes<'_>) -> Result<()> {
        let deadline = tokio::time::Instant::now() + READY_WAIT;
        while !self.synced() {
            if tokio::time::Instant::now() >= deadline {
                return Err(crate::admission::forbidden(
                    attrs,
                    "not yet ready to handle request",
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

/// Namespaces as a replica holds them, asked at the front door when it
/// holds none by that name (one created a moment ago), as kube's admission
/// plugins fall back to a live lookup: a write to a known namespace costs
/// the front door nothing.
pub async fn namespaces(
    cacher: Arc<crate::storage::cacher::Cacher>,
    front_door: Arc<FrontDoor>,
) -> Result<crate::admission::matching::Namespaces> {
    Ok(crate::admission::matching::Namespaces::new(cacher, ROOT)
        .await?
        .with_fallback(front_door))
}

/// An admission plugin that runs only once the replica it reads is listed.
struct Guarded {
    replica: Replica,
    plugin: Arc<dyn AdmissionPlugin>,
}

#[async_trait::async_trait]
impl AdmissionPlugin for Guarded {
    async fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> Result<()> {
        self.replica.ready(attrs).await?;
        self.plugin.admit(attrs, obj).await
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: Option<&Value>) -> Result<()> {
        self.replica.ready(attrs).await?;
        self.plugin.validate(attrs, obj).await
    }
}

/// Keeps one resource's replica.
struct Follower {
    front_door: Arc<FrontDoor>,
    storage: Arc<dyn Storage>,
    resource: Followed,
    prefix: String,
}

impl Follower {
    /// Lists and watches until the process ends.
    async fn run(self, listed: Arc<AtomicUsize>) {
        let mut counted = false;
        loop {
            let error = self.follow(|| {
                if !counted {
                    counted = true;
                    listed.fetch_add(1, Ordering::AcqRel);
                }
            });
            if let Err(error) = error.await {
                tracing::warn!(resource = self.resource.plural, %error, "following the front door");
            }
            tokio::time::sleep(RETRY).await;
        }
    }

    /// Lists, then watches from the list's resourceVersion for as long as
    /// watches resume; returns why it must start over.
    async fn follow(&self, mut on_listed: impl FnMut()) -> Result<()> {
        let list = self.front_door.get(&self.resource.path()).await?;
        let mut version = resource_version(&list).to_string();
        let mut wanted = BTreeMap::new();
        for item in list["items"].as_array().into_iter().flatten() {
            wanted.insert(self.key(item), encode(item)?);
        }
        crate::storage::replace_prefix(self.storage.as_ref(), &self.prefix, wanted).await?;
        on_listed();
        loop {
            let path = format!(
                "{}?watch=true&allowWatchBookmarks=true&resourceVersion={version}&timeoutSeconds={WATCH_SECONDS}",
                self.resource.path()
            );
            let (sender, mut events) = tokio::sync::mpsc::unbounded_channel();
            let watching = self.front_door.watch(
                &path,
                Duration::from_secs(WATCH_SECONDS + 30),
                move |event| {
                    sender
                        .send(event)
                        .map_err(|_| Error::internal("the replica stopped applying"))
                },
            );
            let applying = async {
                while let Some(event) = events.recv().await {
                    self.apply(&event, &mut version).await?;
                }
                Ok::<(), Error>(())
            };
            let (watched, applied) = tokio::join!(watching, applying);
            applied?;
            watched?;
        }
    }

    /// Applies one watch event to the replica, noting its resourceVersion.
    async fn apply(&self, event: &watch_event::Event, version: &mut String) -> Result<()> {
        let object = &event.object;
        match event.kind.as_str() {
            "ADDED" | "MODIFIED" => {
                let key = self.key(object);
                let value = encode(object)?;
                match self.storage.get(&key).await? {
                    Some(held) => self.storage.update(&key, value, held.mod_revision).await?,
                    None => self.storage.create(&key, value).await?,
                };
            }
            "DELETED" => {
                let key = self.key(object);
                if self.storage.get(&key).await?.is_some() {
                    self.storage.delete(&key, None).await?;
                }
            }
            watch_event::BOOKMARK => {}
            _ => {
                let message = object["message"].as_str().unwrap_or("a watch error");
                return Err(Error::new(apimachinery::error::Reason::Gone, message));
            }
        }
        *version = resource_version(object).to_string();
        Ok(())
    }

    /// The key of an object in the replica.
    fn key(&self, object: &Value) -> String {
        let text = |field: &str| object["metadata"][field].as_str().unwrap_or_default();
        let resource = &self.resource;
        apimachinery::keys::object_key(
            ROOT,
            resource.group,
            resource.plural,
            text("namespace"),
            text("name"),
        )
    }
}

/// An object's or list's resourceVersion.
fn resource_version(object: &Value) -> &str {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
}

fn encode(object: &Value) -> Result<Bytes> {
    serde_json::to_vec(object)
        .map(Bytes::from)
        .map_err(Error::internal)
}
