//! Encryption at rest, as kube-apiserver's `--encryption-provider-config`:
//! kube's `EncryptionConfiguration` names resources and, for each, an
//! ordered list of providers (`aescbc`, `aesgcm`, `secretbox`, `identity`).
//!
//! A value is written with the first key of the first provider, prefixed
//! `k8s:enc:<provider>:v1:<key name>:` (identity writes the plain value),
//! and read with whichever provider's key its prefix names. A value read
//! with any other than the first key is *stale*: an update rewrites it even
//! when the object did not change, which is how keys rotate (add a key in
//! front, restart, rewrite every object, then drop the old key).
//!
//! [`EncryptedStorage`] wraps a [`Storage`] with this, so every reader
//! (the registry, the watch cache) sees plain values and etcd only ciphertext.

use std::path::Path;
use std::sync::Arc;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use base64::Engine;
use bytes::Bytes;
use cbc::cipher::block_padding::Pkcs7;
use cbc::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use futures::StreamExt;
use rand::RngCore;
use serde::Deserialize;

use super::{Event, EventStream, KeyValue, Page, Result, Storage};
use crate::Error;

/// What every encrypted value starts with.
const ENCRYPTED: &[u8] = b"k8s:enc:";

/// Groups without a dot: a key's first segment names a group, not a core
/// resource, when it has a dot or is one of these (a CRD's group must
/// have a dot).
const DOTLESS_GROUPS: &[&str] = &["apps", "autoscaling", "batch", "policy"];

/// kube's `EncryptionConfiguration` file.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConfigFile {
    api_version: String,
    kind: String,
    #[serde(default)]
    resources: Vec<ResourcesFile>,
}

/// One entry of `resources`: which resources, and their providers.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourcesFile {
    resources: Vec<String>,
    providers: Vec<ProviderFile>,
}

/// One provider: exactly one of the fields is set.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderFile {
    aescbc: Option<KeysFile>,
    aesgcm: Option<KeysFile>,
    secretbox: Option<KeysFile>,
    identity: Option<serde_json::Value>,
    kms: Option<serde_json::Value>,
}

/// A provider's keys, the first used to write.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    keys: Vec<KeyFile>,
}

/// One named key, base64-encoded.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    name: String,
    secret: String,
}

/// Which resources an entry of the configuration covers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Selector {
    /// One resource of one group (`secrets`, `deployments.apps`).
    Resource { group: String, resource: String },
    /// Every resource of a group (`*.apps`, `*.` for the core group).
    Group(String),
    /// Everything (`*.*`).
    Everything,
}

impl Selector {
    fn parse(text: &str) -> std::result::Result<Selector, String> {
        let (resource, group) = text.split_once('.').unwrap_or((text, ""));
        match (resource, group) {
            ("", _) => Err(format!("resource {text:?} has no name")),
            ("*", "*") => Ok(Selector::Everything),
            (_, "*") => Err(format!(
                "resource {text:?}: a group wildcard is only allowed as \"*.*\""
            )),
            ("*", group) => Ok(Selector::Group(group.to_string())),
            (resource, group) => Ok(Selector::Resource {
                group: group.to_string(),
                resource: resource.to_string(),
            }),
        }
    }

    fn covers(&self, group: &str, resource: &str) -> bool {
        match self {
            Selector::Everything => true,
            Selector::Group(g) => g == group,
            Selector::Resource {
                group: g,
                resource: r,
            } => g == group && r == resource,
        }
    }
}

/// How one key encrypts.
enum Cipher {
    /// No encryption.
    Identity,
    /// AES in CBC mode with PKCS#7 padding and a random IV.
    AesCbc(Vec<u8>),
    /// AES-GCM with a random nonce, authenticating the etcd key.
    AesGcm(Vec<u8>),
    /// XSalsa20-Poly1305 (NaCl's secretbox) with a random nonce.
    Secretbox(Vec<u8>),
}

/// One key of one provider, with the prefix its values carry.
struct Transformer {
    prefix: Vec<u8>,
    cipher: Cipher,
}

/// One entry of the configuration.
struct Rule {
    selectors: Vec<Selector>,
    /// In order: the first writes, any reads.
    transformers: Vec<Transformer>,
}

/// A loaded encryption configuration.
pub struct Encryption {
    /// The key prefix of every object (`/registry`).
    root: String,
    rules: Vec<Rule>,
}

fn invalid(why: impl std::fmt::Display) -> Error {
    Error::Encryption(format!("invalid encryption configuration: {why}"))
}

impl Encryption {
    /// Reads kube's `EncryptionConfiguration` (YAML or JSON) from `path`,
    /// for objects under `root`.
    pub fn load(path: &Path, root: &str) -> Result<Encryption> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::read(path, e))?;
        Encryption::parse(&text, root)
    }

    /// Parses kube's `EncryptionConfiguration`, for objects under `root`.
    pub fn parse(text: &str, root: &str) -> Result<Encryption> {
        let file: ConfigFile = apimachinery::yaml::from_str(text).map_err(invalid)?;
        if file.kind != "EncryptionConfiguration"
            || !matches!(
                file.api_version.as_str(),
                "apiserver.config.k8s.io/v1" | "apiserver.config.k8s.io/v1beta1"
            )
        {
            return Err(invalid(format!(
                "want kind EncryptionConfiguration of apiserver.config.k8s.io/v1, got {} of {}",
                file.kind, file.api_version
            )));
        }
        let mut rules = Vec::new();
        for (i, entry) in file.resources.into_iter().enumerate() {
            if entry.resources.is_empty() || entry.providers.is_empty() {
                return Err(invalid(format!(
                    "resources[{i}] needs at least one resource and one provider"
                )));
            }
            let selectors = entry
                .resources
                .iter()
                .map(|r| Selector::parse(r))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| invalid(format!("resources[{i}]: {e}")))?;
            let mut transformers = Vec::new();
            for (j, provider) in entry.providers.into_iter().enumerate() {
                transformers.extend(
                    provider
                        .transformers()
                        .map_err(|e| invalid(format!("resources[{i}].providers[{j}]: {e}")))?,
                );
            }
            rules.push(Rule {
                selectors,
                transformers,
            });
        }
        Ok(Encryption {
            root: format!("{}/", root.trim_end_matches('/')),
            rules,
        })
    }

    /// The rule for the object at `key`: the first entry naming its resource.
    fn rule(&self, key: &str) -> Option<&Rule> {
        let rest = key.strip_prefix(&self.root)?;
        let mut segments = rest.split('/');
        let first = segments.next()?;
        let (group, resource) = if first.contains('.') || DOTLESS_GROUPS.contains(&first) {
            (first, segments.next()?)
        } else {
            ("", first)
        };
        self.rules
            .iter()
            .find(|rule| rule.selectors.iter().any(|s| s.covers(group, resource)))
    }

    /// The value to store at `key`.
    pub fn encrypt(&self, key: &str, value: &[u8]) -> Result<Vec<u8>> {
        match self.rule(key).and_then(|r| r.transformers.first()) {
            None => Ok(value.to_vec()),
            Some(t) => t.encrypt(key, value),
        }
    }

    /// The plain value stored at `key`, and whether it is stale (not
    /// written with the key that writes now).
    pub fn decrypt(&self, key: &str, stored: &[u8]) -> Result<(Vec<u8>, bool)> {
        let Some(rule) = self.rule(key) else {
            return Ok((stored.to_vec(), false));
        };
        if stored.starts_with(ENCRYPTED) {
            for (i, t) in rule.transformers.iter().enumerate() {
                if !t.prefix.is_empty() && stored.starts_with(&t.prefix) {
                    let plain = t.decrypt(key, &stored[t.prefix.len()..])?;
                    return Ok((plain, i > 0));
                }
            }
        }
        match rule
            .transformers
            .iter()
            .position(|t| matches!(t.cipher, Cipher::Identity))
        {
            Some(i) => Ok((stored.to_vec(), i > 0)),
            None => Err(Error::Encryption(format!(
                "{key}: no matching prefix found among the configured keys"
            ))),
        }
    }
}

impl ProviderFile {
    /// The provider's keys, in order.
    fn transformers(self) -> std::result::Result<Vec<Transformer>, String> {
        let set = [
            self.aescbc.is_some(),
            self.aesgcm.is_some(),
            self.secretbox.is_some(),
            self.identity.is_some(),
            self.kms.is_some(),
        ];
        if set.iter().filter(|s| **s).count() != 1 {
            return Err("exactly one provider type must be set".into());
        }
        if self.kms.is_some() {
            return Err("kms providers are not supported".into());
        }
        if self.identity.is_some() {
            return Ok(vec![Transformer {
                prefix: Vec::new(),
                cipher: Cipher::Identity,
            }]);
        }
        let (name, keys, sizes): (&str, KeysFile, &[usize]) = if let Some(k) = self.aescbc {
            ("aescbc", k, &[16, 24, 32])
        } else if let Some(k) = self.aesgcm {
            ("aesgcm", k, &[16, 24, 32])
        } else if let Some(k) = self.secretbox {
            ("secretbox", k, &[32])
        } else {
            return Err("exactly one provider type must be set".into());
        };
        if keys.keys.is_empty() {
            return Err(format!("{name}: at least one key is required"));
        }
        let mut out: Vec<Transformer> = Vec::new();
        for key in keys.keys {
            if key.name.is_empty() || key.name.contains(':') {
                return Err(format!(
                    "{name}: key name {:?} must be non-empty and without ':'",
                    key.name
                ));
            }
            let secret = base64::engine::general_purpose::STANDARD
                .decode(key.secret.trim())
                .map_err(|e| format!("{name}: key {:?}: secret is not base64: {e}", key.name))?;
            if !sizes.contains(&secret.len()) {
                return Err(format!(
                    "{name}: key {:?}: secret is {} bytes, want {}",
                    key.name,
                    secret.len(),
                    sizes
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            let prefix = format!("k8s:enc:{name}:v1:{}:", key.name).into_bytes();
            if out.iter().any(|t| t.prefix == prefix) {
                return Err(format!("{name}: key name {:?} is used twice", key.name));
            }
            let cipher = match name {
                "aescbc" => Cipher::AesCbc(secret),
                "aesgcm" => Cipher::AesGcm(secret),
                _ => Cipher::Secretbox(secret),
            };
            out.push(Transformer { prefix, cipher });
        }
        Ok(out)
    }
}

const CBC_IV: usize = 16;
const GCM_NONCE: usize = 12;
const SECRETBOX_NONCE: usize = 24;

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

fn failed(key: &str, what: &str) -> Error {
    Error::Encryption(format!("{key}: {what}"))
}

/// Runs `$body` with `$cipher` bound to the AES type of the key's size.
macro_rules! with_aes {
    ($secret:expr, $key:expr, |$aes:ident| $body:expr) => {
        match $secret.len() {
            16 => {
                type $aes = aes::Aes128;
                $body
            }
            24 => {
                type $aes = aes::Aes192;
                $body
            }
            32 => {
                type $aes = aes::Aes256;
                $body
            }
            _ => Err(failed($key, "key has a size AES does not take")),
        }
    };
}

impl Transformer {
    fn encrypt(&self, key: &str, plain: &[u8]) -> Result<Vec<u8>> {
        let mut out = self.prefix.clone();
        match &self.cipher {
            Cipher::Identity => out.extend_from_slice(plain),
            Cipher::AesCbc(secret) => {
                let iv = random::<CBC_IV>();
                let sealed = with_aes!(secret, key, |A| cbc::Encryptor::<A>::new_from_slices(
                    secret, &iv
                )
                .map(|c| c.encrypt_padded_vec_mut::<Pkcs7>(plain))
                .map_err(|_| failed(key, "bad AES key or IV")))?;
                out.extend_from_slice(&iv);
                out.extend_from_slice(&sealed);
            }
            Cipher::AesGcm(secret) => {
                let nonce = random::<GCM_NONCE>();
                let payload = Payload {
                    msg: plain,
                    aad: key.as_bytes(),
                };
                let sealed = with_aes!(secret, key, |A| {
                    aes_gcm::AesGcm::<A, aes_gcm::aead::consts::U12>::new_from_slice(secret)
                        .map_err(|_| failed(key, "bad AES key"))
                        .and_then(|c| {
                            c.encrypt(&nonce.into(), payload)
                                .map_err(|_| failed(key, "AES-GCM failed"))
                        })
                })?;
                out.extend_from_slice(&nonce);
                out.extend_from_slice(&sealed);
            }
            Cipher::Secretbox(secret) => {
                let nonce = random::<SECRETBOX_NONCE>();
                let sealed = crypto_secretbox::XSalsa20Poly1305::new_from_slice(secret)
                    .map_err(|_| failed(key, "bad secretbox key"))?
                    .encrypt(&nonce.into(), plain)
                    .map_err(|_| failed(key, "secretbox failed"))?;
                out.extend_from_slice(&nonce);
                out.extend_from_slice(&sealed);
            }
        }
        Ok(out)
    }

    fn decrypt(&self, key: &str, sealed: &[u8]) -> Result<Vec<u8>> {
        match &self.cipher {
            Cipher::Identity => Ok(sealed.to_vec()),
            Cipher::AesCbc(secret) => {
                if sealed.len() < CBC_IV || !(sealed.len() - CBC_IV).is_multiple_of(CBC_IV) {
                    return Err(failed(key, "the stored value is not whole AES-CBC blocks"));
                }
                let (iv, body) = sealed.split_at(CBC_IV);
                with_aes!(secret, key, |A| cbc::Decryptor::<A>::new_from_slices(
                    secret, iv
                )
                .map_err(|_| failed(key, "bad AES key or IV"))
                .and_then(|c| c
                    .decrypt_padded_vec_mut::<Pkcs7>(body)
                    .map_err(|_| failed(key, "AES-CBC decryption failed"))))
            }
            Cipher::AesGcm(secret) => {
                if sealed.len() < GCM_NONCE {
                    return Err(failed(key, "the stored value is shorter than a nonce"));
                }
                let (nonce, body) = sealed.split_at(GCM_NONCE);
                let nonce = aes_gcm::Nonce::from_slice(nonce);
                let payload = Payload {
                    msg: body,
                    aad: key.as_bytes(),
                };
                with_aes!(secret, key, |A| {
                    aes_gcm::AesGcm::<A, aes_gcm::aead::consts::U12>::new_from_slice(secret)
                        .map_err(|_| failed(key, "bad AES key"))
                        .and_then(|c| {
                            c.decrypt(nonce, payload)
                                .map_err(|_| failed(key, "AES-GCM decryption failed"))
                        })
                })
            }
            Cipher::Secretbox(secret) => {
                if sealed.len() < SECRETBOX_NONCE {
                    return Err(failed(key, "the stored value is shorter than a nonce"));
                }
                let (nonce, body) = sealed.split_at(SECRETBOX_NONCE);
                crypto_secretbox::XSalsa20Poly1305::new_from_slice(secret)
                    .map_err(|_| failed(key, "bad secretbox key"))?
                    .decrypt(crypto_secretbox::Nonce::from_slice(nonce), body)
                    .map_err(|_| failed(key, "secretbox decryption failed"))
            }
        }
    }
}

/// A [`Storage`] that encrypts the values [`Encryption`] names on the way
/// in and decrypts them on the way out.
pub struct EncryptedStorage {
    inner: Arc<dyn Storage>,
    encryption: Arc<Encryption>,
}

impl EncryptedStorage {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Storage>, encryption: Encryption) -> Self {
        EncryptedStorage {
            inner,
            encryption: Arc::new(encryption),
        }
    }
}

/// `kv` with its value decrypted.
fn open(encryption: &Encryption, mut kv: KeyValue) -> Result<KeyValue> {
    if kv.value.is_empty() {
        return Ok(kv);
    }
    let (plain, stale) = encryption.decrypt(&kv.key, &kv.value)?;
    kv.value = Bytes::from(plain);
    kv.stale = stale;
    Ok(kv)
}

/// `kv` decrypted for a watch event: a value that does not decrypt is
/// passed on as stored (logged), which no cache takes for an object, rather
/// than ending the watch every cache depends on.
fn open_event(encryption: &Encryption, kv: KeyValue) -> KeyValue {
    let raw = kv.clone();
    open(encryption, kv).unwrap_or_else(|e| {
        tracing::error!(error = %e, "cannot decrypt a watched value");
        raw
    })
}

#[async_trait::async_trait]
impl Storage for EncryptedStorage {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        match self.inner.get(key).await? {
            None => Ok(None),
            Some(kv) => Ok(Some(open(&self.encryption, kv)?)),
        }
    }

    async fn range(&self, start: &str, end: &str, limit: i64, revision: i64) -> Result<Page> {
        let mut page = self.inner.range(start, end, limit, revision).await?;
        page.kvs = page
            .kvs
            .into_iter()
            .map(|kv| open(&self.encryption, kv))
            .collect::<Result<_>>()?;
        Ok(page)
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<i64> {
        let sealed = self.encryption.encrypt(key, &value)?;
        self.inner.create(key, Bytes::from(sealed)).await
    }

    async fn update(&self, key: &str, value: Bytes, expected: i64) -> Result<i64> {
        let sealed = self.encryption.encrypt(key, &value)?;
        match self.inner.update(key, Bytes::from(sealed), expected).await {
            Err(Error::Conflict {
                key,
                expected,
                current,
            }) => Err(Error::Conflict {
                current: current.map(|kv| open_event(&self.encryption, kv)),
                key,
                expected,
            }),
            other => other,
        }
    }

    async fn delete(&self, key: &str, expected: Option<i64>) -> Result<(KeyValue, i64)> {
        let (kv, revision) = self.inner.delete(key, expected).await?;
        Ok((open_event(&self.encryption, kv), revision))
    }

    async fn watch(&self, start: &str, end: &str, from_revision: i64) -> Result<EventStream> {
        let encryption = self.encryption.clone();
        let events = self.inner.watch(start, end, from_revision).await?;
        Ok(events
            .map(move |batch| {
                batch.map(|events| {
                    events
                        .into_iter()
                        .map(|e| Event {
                            kind: e.kind,
                            kv: open_event(&encryption, e.kv),
                            prev: e.prev.map(|p| open_event(&encryption, p)),
                        })
                        .collect()
                })
            })
            .boxed())
    }

    async fn current_revision(&self) -> Result<i64> {
        self.inner.current_revision().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::memory::MemoryStorage;

    const KEY1: &str = "c2VjcmV0IGlzIHNlY3VyZSwgb3IgaXMgaXQ/Pz8/Pz8="; // 32 bytes
    const KEY2: &str = "MTIzNDU2Nzg5MGFiY2RlZjEyMzQ1Njc4OTBhYmNkZWY="; // 32 bytes
    const KEY16: &str = "MTIzNDU2Nzg5MGFiY2RlZg=="; // 16 bytes

    fn config(providers: &str) -> Encryption {
        let text = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n\
             resources:\n- resources: [secrets, \"*.apps\"]\n  providers:\n{providers}"
        );
        Encryption::parse(&text, "/registry").unwrap()
    }

    fn aescbc(name: &str, secret: &str) -> String {
        format!("  - aescbc:\n      keys:\n      - name: {name}\n        secret: {secret}\n")
    }

    #[test]
    fn every_provider_round_trips_with_kubes_prefix() {
        for (provider, secret) in [
            ("aescbc", KEY1),
            ("aescbc", KEY16),
            ("aesgcm", KEY1),
            ("aesgcm", KEY16),
            ("secretbox", KEY2),
        ] {
            let enc = config(&format!(
                "  - {provider}:\n      keys:\n      - name: k1\n        secret: {secret}\n"
            ));
            let key = "/registry/secrets/ns/s";
            let sealed = enc.encrypt(key, b"{\"data\":1}").unwrap();
            let prefix = format!("k8s:enc:{provider}:v1:k1:");
            assert!(sealed.starts_with(prefix.as_bytes()), "{provider}");
            assert!(!sealed.windows(8).any(|w| w == b"\"data\":1"), "{provider}");
            assert_eq!(
                enc.decrypt(key, &sealed).unwrap(),
                (b"{\"data\":1}".to_vec(), false),
                "{provider}"
            );
            // Two writes of one value differ (random IV or nonce).
            assert_ne!(sealed, enc.encrypt(key, b"{\"data\":1}").unwrap());
        }
    }

    #[test]
    fn only_named_resources_are_encrypted() {
        let enc = config(&aescbc("k1", KEY1));
        for key in ["/registry/secrets/ns/s", "/registry/apps/deployments/ns/d"] {
            assert!(
                enc.encrypt(key, b"{}").unwrap().starts_with(ENCRYPTED),
                "{key}"
            );
        }
        for key in [
            "/registry/configmaps/ns/c",
            "/registry/example.com/secrets/ns/s",
            "/kubechain/endpoints/x",
        ] {
            assert_eq!(enc.encrypt(key, b"{}").unwrap(), b"{}", "{key}");
        }
    }

    #[test]
    fn an_older_key_reads_and_marks_the_value_stale() {
        let old = config(&aescbc("k1", KEY1));
        let sealed = old.encrypt("/registry/secrets/a/b", b"v").unwrap();
        let rotated = config(&format!(
            "  - aescbc:\n      keys:\n      - name: k2\n        secret: {KEY2}\n      \
             - name: k1\n        secret: {KEY1}\n"
        ));
        assert_eq!(
            rotated.decrypt("/registry/secrets/a/b", &sealed).unwrap(),
            (b"v".to_vec(), true)
        );
        let fresh = rotated.encrypt("/registry/secrets/a/b", b"v").unwrap();
        assert!(fresh.starts_with(b"k8s:enc:aescbc:v1:k2:"));
        // Without the old key, the old value no longer reads.
        let dropped = config(&aescbc("k2", KEY2));
        assert!(dropped.decrypt("/registry/secrets/a/b", &sealed).is_err());
    }

    #[test]
    fn identity_reads_plain_values_and_writes_them_when_first() {
        let enc = config(&format!("  - identity: {{}}\n{}", aescbc("k1", KEY1)));
        assert_eq!(enc.encrypt("/registry/secrets/a/b", b"v").unwrap(), b"v");
        let sealed = config(&aescbc("k1", KEY1))
            .encrypt("/registry/secrets/a/b", b"v")
            .unwrap();
        assert_eq!(
            enc.decrypt("/registry/secrets/a/b", &sealed).unwrap(),
            (b"v".to_vec(), true)
        );
        // Encryption switched on: plain values read, stale until rewritten.
        let on = config(&format!("{}  - identity: {{}}\n", aescbc("k1", KEY1)));
        assert_eq!(
            on.decrypt("/registry/secrets/a/b", b"{}").unwrap(),
            (b"{}".to_vec(), true)
        );
        // Without identity, a plain value is refused, not passed on.
        assert!(
            config(&aescbc("k1", KEY1))
                .decrypt("/registry/secrets/a/b", b"{}")
                .is_err()
        );
    }

    #[test]
    fn aes_gcm_binds_the_value_to_its_key() {
        let enc = config(
            "  - aesgcm:\n      keys:\n      - name: k1\n        secret: KEY\n"
                .replace("KEY", KEY1)
                .as_str(),
        );
        let sealed = enc.encrypt("/registry/secrets/a/b", b"v").unwrap();
        assert!(enc.decrypt("/registry/secrets/a/c", &sealed).is_err());
    }

    #[test]
    fn damaged_values_are_errors_not_panics() {
        for provider in ["aescbc", "aesgcm", "secretbox"] {
            let enc = config(&format!(
                "  - {provider}:\n      keys:\n      - name: k1\n        secret: {KEY1}\n"
            ));
            let key = "/registry/secrets/a/b";
            let sealed = enc.encrypt(key, b"some value").unwrap();
            let prefix = format!("k8s:enc:{provider}:v1:k1:").len();
            for cut in prefix..sealed.len() {
                assert!(
                    enc.decrypt(key, &sealed[..cut]).is_err(),
                    "{provider} {cut}"
                );
            }
            let mut flipped = sealed.clone();
            let last = flipped.len() - 1;
            flipped[last] ^= 1;
            assert!(enc.decrypt(key, &flipped).is_err(), "{provider}");
        }
    }

    #[test]
    fn bad_configurations_are_refused_with_a_reason() {
        let cases = [
            (aescbc("k1", "c2hvcnQ="), "secret is 5 bytes"),
            (aescbc("k1", "'@@@@'"), "not base64"),
            (
                format!(
                    "{}{}",
                    aescbc("k1", KEY1).trim_end(),
                    "\n      - name: k1\n        secret: KEY\n".replace("KEY", KEY2)
                ),
                "used twice",
            ),
            (
                "  - kms:\n      name: x\n".into(),
                "kms providers are not supported",
            ),
            (
                "  - identity: {}\n    aescbc:\n      keys: []\n".into(),
                "exactly one",
            ),
            ("  - aescbc:\n      keys: []\n".into(), "at least one key"),
            ("  - rot13: {}\n".into(), "unknown field"),
        ];
        for (providers, want) in cases {
            let text = format!(
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n\
                 resources:\n- resources: [secrets]\n  providers:\n{providers}"
            );
            let err = Encryption::parse(&text, "/registry")
                .err()
                .expect(want)
                .to_string();
            assert!(err.contains(want), "{err} should say {want}");
        }
        let wrong_kind = "apiVersion: v1\nkind: ConfigMap\nresources: []\n";
        assert!(Encryption::parse(wrong_kind, "/registry").is_err());
        assert_eq!(
            Selector::parse("foo.*").unwrap_err(),
            "resource \"foo.*\": a group wildcard is only allowed as \"*.*\""
        );
        assert_eq!(
            Selector::parse("*.").unwrap(),
            Selector::Group(String::new())
        );
    }

    #[tokio::test]
    async fn the_wrapper_stores_ciphertext_and_serves_plain_values() {
        let memory = Arc::new(MemoryStorage::default());
        let store = EncryptedStorage::new(memory.clone(), config(&aescbc("k1", KEY1)));
        let key = "/registry/secrets/ns/s";
        let mut watch = store.watch("/registry/", "/registry0", 1).await.unwrap();
        let rev = store
            .create(key, Bytes::from_static(b"{\"a\":1}"))
            .await
            .unwrap();
        let raw = memory.get(key).await.unwrap().unwrap();
        assert!(raw.value.starts_with(b"k8s:enc:aescbc:v1:k1:"));
        let kv = store.get(key).await.unwrap().unwrap();
        assert_eq!(
            (kv.value.as_ref(), kv.stale),
            (b"{\"a\":1}".as_ref(), false)
        );
        let page = store.range("/registry/", "/registry0", 0, 0).await.unwrap();
        assert_eq!(page.kvs[0].value.as_ref(), b"{\"a\":1}");
        let event = watch.next().await.unwrap().unwrap();
        assert_eq!(event[0].kv.value.as_ref(), b"{\"a\":1}");
        match store.update(key, Bytes::from_static(b"{}"), rev - 1).await {
            Err(Error::Conflict {
                current: Some(c), ..
            }) => {
                assert_eq!(c.value.as_ref(), b"{\"a\":1}")
            }
            other => panic!("want a conflict, got {other:?}"),
        }
        let (old, _) = store.delete(key, None).await.unwrap();
        assert_eq!(old.value.as_ref(), b"{\"a\":1}");
    }
}
