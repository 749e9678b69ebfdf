//! Conversion between two versions of a kind, written as the author's
//! `From` impls between their Rust types: the stored version is the hub,
//! and each object is parsed in the version it is in and written in the
//! version asked, as kube's scheme converts through its internal type.

use std::marker::PhantomData;
use std::sync::Arc;

use apimachinery::error::{Error, Result};
use generic_server::strategy::Converter;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What a version of a kind needs to take part in a [`Conversion`].
pub trait Versioned:
    k8s_openapi::Resource + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

impl<K> Versioned for K where
    K: k8s_openapi::Resource + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

/// Converts objects of one kind between its stored version `Stored` and
/// another served version `Served`, with `From` both ways. Give it to
/// both versions' resources with [`crate::Resource::converted_by`].
pub struct Conversion<Stored, Served>(PhantomData<fn() -> (Stored, Served)>);

impl<Stored, Served> Conversion<Stored, Served>
where
    Stored: Versioned + From<Served>,
    Served: Versioned + From<Stored>,
{
    /// The converter, shared by the kind's resources.
    pub fn shared() -> Arc<dyn Converter> {
        Arc::new(Conversion::<Stored, Served>(PhantomData))
    }
}

/// `object` parsed as `K`, or a 500 naming what did not fit.
fn parse<K: Versioned>(object: Value) -> Result<K> {
    serde_json::from_value(object)
        .map_err(|e| Error::internal(format!("converting from {}: {e}", K::API_VERSION)))
}

/// `object` written as JSON, with its apiVersion and kind.
fn write<K: Versioned>(object: &K) -> Result<Value> {
    let mut value = serde_json::to_value(object)
        .map_err(|e| Error::internal(format!("converting to {}: {e}", K::API_VERSION)))?;
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), K::API_VERSION.into());
        map.insert("kind".into(), K::KIND.into());
    }
    Ok(value)
}

#[async_trait::async_trait]
impl<Stored, Served> Converter for Conversion<Stored, Served>
where
    Stored: Versioned + From<Served>,
    Served: Versioned + From<Stored>,
{
    fn storage_version(&self) -> String {
        Stored::API_VERSION.to_string()
    }

    async fn convert(&self, objects: Vec<Value>, api_version: &str) -> Result<Vec<Value>> {
        objects
            .into_iter()
            .map(|object| {
                let from = object["apiVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                match (from.as_str(), api_version) {
                    (from, to) if from == to => Ok(object),
                    (from, to) if from == Stored::API_VERSION && to == Served::API_VERSION => {
                        write(&Served::from(parse::<Stored>(object)?))
                    }
                    (from, to) if from == Served::API_VERSION && to == Stored::API_VERSION => {
                        write(&Stored::from(parse::<Served>(object)?))
                    }
                    (from, to) => Err(Error::bad_request(format!(
                        "no conversion of {} from {from:?} to {to:?}",
                        Stored::KIND
                    ))),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Serialize, Deserialize, schemars::JsonSchema)]
    struct Old {
        metadata: ObjectMeta,
        size: i64,
    }
    crate::kind!(Old, "example.com", "v1", "olds", Cluster);

    #[derive(Serialize, Deserialize, schemars::JsonSchema)]
    struct New {
        metadata: ObjectMeta,
        bytes: i64,
    }
    crate::kind!(New, "example.com", "v2", "news", Cluster);

    impl From<New> for Old {
        fn from(new: New) -> Old {
            Old {
                metadata: new.metadata,
                size: new.bytes / 1024,
            }
        }
    }
    impl From<Old> for New {
        fn from(old: Old) -> New {
            New {
                metadata: old.metadata,
                bytes: old.size * 1024,
            }
        }
    }

    #[tokio::test]
    async fn objects_convert_both_ways_and_other_versions_are_refused() {
        let converter = Conversion::<Old, New>::shared();
        assert_eq!(converter.storage_version(), "example.com/v1");
        let old = json!({"apiVersion": "example.com/v1", "kind": "Old",
                         "metadata": {"name": "a", "resourceVersion": "7"}, "size": 2});
        let new = converter
            .convert(vec![old.clone()], "example.com/v2")
            .await
            .unwrap();
        assert_eq!(new[0]["bytes"], 2048);
        assert_eq!(new[0]["apiVersion"], "example.com/v2");
        assert_eq!(new[0]["kind"], "New");
        assert_eq!(new[0]["metadata"]["resourceVersion"], "7");
        let back = converter.convert(new, "example.com/v1").await.unwrap();
        assert_eq!(back[0]["size"], 2);
        assert_eq!(back[0]["apiVersion"], "example.com/v1");
        let same = converter
            .convert(vec![old.clone()], "example.com/v1")
            .await
            .unwrap();
        assert_eq!(same[0], old);
        let odd = converter.convert(vec![old], "example.com/v3").await;
        assert_eq!(odd.unwrap_err().code(), 400);
    }
}
