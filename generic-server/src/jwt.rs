//! Service account tokens: ES256 JSON Web Tokens, signed by the core server
//! for a TokenRequest and verified by the front door.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{self, EcdsaKeyPair, KeyPair, UnparsedPublicKey};
use serde_json::{Value, json};

use crate::Error;
use crate::request::UserInfo;

fn pem_der(pem: &[u8], label: &str) -> Result<Vec<u8>, Error> {
    let text = std::str::from_utf8(pem).map_err(|_| Error::SigningKey("not PEM".into()))?;
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let body = text
        .split(&begin)
        .nth(1)
        .and_then(|rest| rest.split(&end).next())
        .ok_or_else(|| Error::SigningKey(format!("no {label} block")))?;
    let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| Error::SigningKey(e.to_string()))
}

/// Signs service account tokens with an EC P-256 key (PKCS#8 PEM).
pub struct Signer {
    key: EcdsaKeyPair,
    kid: String,
    issuer: String,
}

impl Signer {
    /// A signer from a PKCS#8 PEM private key.
    pub fn new(private_pem: &[u8], issuer: &str) -> Result<Signer, Error> {
        let der = pem_der(private_pem, "PRIVATE KEY")?;
        let key = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &der,
            &ring::rand::SystemRandom::new(),
        )
        .map_err(|e| Error::SigningKey(e.to_string()))?;
        let digest = ring::digest::digest(&ring::digest::SHA256, key.public_key().as_ref());
        let kid = URL_SAFE_NO_PAD.encode(digest.as_ref());
        Ok(Signer {
            key,
            kid,
            issuer: issuer.into(),
        })
    }

    /// A token for `account`, for `audiences`, valid for `seconds` from
    /// `now` (Unix time).
    pub fn token(
        &self,
        account: &Account,
        audiences: &[String],
        now: i64,
        seconds: i64,
    ) -> Result<String, Error> {
        let header = json!({"alg": "ES256", "kid": self.kid});
        let Account {
            namespace,
            name,
            uid,
            bound,
        } = account;
        let mut private = json!({
            "namespace": namespace,
            "serviceaccount": {"name": name, "uid": uid},
        });
        if let Some(object) = bound {
            private[object.kind.claim()] = json!({"name": object.name, "uid": object.uid});
        }
        let claims = json!({
            "aud": audiences,
            "exp": now + seconds,
            "iat": now,
            "nbf": now,
            "iss": self.issuer,
            "jti": uuid::Uuid::new_v4().to_string(),
            "sub": format!("system:serviceaccount:{namespace}:{name}"),
            "kubernetes.io": private,
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = self
            .key
            .sign(&ring::rand::SystemRandom::new(), signing_input.as_bytes())
            .map_err(|_| Error::SigningKey("signing failed".into()))?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(sig.as_ref())
        ))
    }
}

/// The service account a token is for, and what it is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// The account's namespace.
    pub namespace: String,
    /// The account's name.
    pub name: String,
    /// The account's uid: the token dies with it.
    pub uid: String,
    /// The Pod or Secret the token is bound to, if any: it dies with that too.
    pub bound: Option<BoundObject>,
}

/// What kind of object a token may be bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundKind {
    /// A Pod (its name and uid become `authentication.kubernetes.io/pod-*` extras).
    Pod,
    /// A Secret.
    Secret,
}

impl BoundKind {
    /// The kind a TokenRequest's `boundObjectRef` names (`v1` Pod or Secret).
    pub fn from_kind(kind: &str) -> Option<BoundKind> {
        match kind {
            "Pod" => Some(BoundKind::Pod),
            "Secret" => Some(BoundKind::Secret),
            _ => None,
        }
    }

    /// The claim under `kubernetes.io` that names the object.
    fn claim(self) -> &'static str {
        match self {
            BoundKind::Pod => "pod",
            BoundKind::Secret => "secret",
        }
    }

    /// The core resource the object is one of.
    pub fn resource(self) -> &'static str {
        match self {
            BoundKind::Pod => "pods",
            BoundKind::Secret => "secrets",
        }
    }
}

/// The object a token is bound to, in the token's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundObject {
    /// Pod or Secret.
    pub kind: BoundKind,
    /// Its name.
    pub name: String,
    /// Its uid: a recreated object does not revive the token.
    pub uid: String,
}

/// A token that passed every check.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The service account it stands for.
    pub user: UserInfo,
    /// The object it is bound to, which must still exist for it to be valid.
    pub bound: Option<BoundObject>,
    /// The audiences asked about that it is for.
    pub audiences: Vec<String>,
    /// Its `exp` (Unix time).
    pub expires: i64,
}

/// Verifies service account tokens with the public key (SPKI PEM).
pub struct Verifier {
    public_key: Vec<u8>,
    issuer: String,
}

impl Verifier {
    /// A verifier from a `PUBLIC KEY` PEM.
    pub fn new(public_pem: &[u8], issuer: &str) -> Result<Verifier, Error> {
        let der = pem_der(public_pem, "PUBLIC KEY")?;
        use x509_parser::prelude::FromDer;
        let (_, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(&der)
            .map_err(|e| Error::SigningKey(e.to_string()))?;
        Ok(Verifier {
            public_key: spki.subject_public_key.data.to_vec(),
            issuer: issuer.into(),
        })
    }

    /// The user a token for the API server (its issuer as audience) stands
    /// for, checking signature, issuer, audience and time.
    pub fn verify(&self, token: &str, now: i64) -> Result<UserInfo, Error> {
        let audiences = [self.issuer.clone()];
        self.verify_for(token, now, &audiences).map(|v| v.user)
    }

    /// The issuer: the audience the API server's own tokens carry.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The user a token stands for and which of `audiences` it is for
    /// (at least one, or the token is refused).
    pub fn verify_for(
        &self,
        token: &str,
        now: i64,
        audiences: &[String],
    ) -> Result<Verified, Error> {
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(sig), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Error::InvalidToken("not a JWT"));
        };
        let decode = |s: &str| {
            URL_SAFE_NO_PAD
                .decode(s)
                .map_err(|_| Error::InvalidToken("bad base64"))
        };
        let header: Value = serde_json::from_slice(&decode(header)?)
            .map_err(|_| Error::InvalidToken("bad header"))?;
        if header["alg"] != "ES256" {
            return Err(Error::InvalidToken("unsupported algorithm"));
        }
        let signing_input = &token[..token.rfind('.').unwrap_or(0)];
        UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &self.public_key)
            .verify(signing_input.as_bytes(), &decode(sig)?)
            .map_err(|_| Error::InvalidToken("bad signature"))?;
        let claims: Value = serde_json::from_slice(&decode(claims)?)
            .map_err(|_| Error::InvalidToken("bad claims"))?;
        if claims["iss"] != self.issuer.as_str() {
            return Err(Error::InvalidToken("wrong issuer"));
        }
        let matched: Vec<String> = audiences
            .iter()
            .filter(|wanted| {
                claims["aud"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|aud| aud == wanted.as_str()))
            })
            .cloned()
            .collect();
        if matched.is_empty() {
            return Err(Error::InvalidToken("wrong audience"));
        }
        let time = |k: &str| claims[k].as_i64().unwrap_or(0);
        if time("exp") <= now || time("nbf") > now + 60 {
            return Err(Error::InvalidToken("expired or not yet valid"));
        }
        let k8s = &claims["kubernetes.io"];
        let namespace = k8s["namespace"]
            .as_str()
            .ok_or(Error::InvalidToken("no namespace"))?;
        let name = k8s
            .pointer("/serviceaccount/name")
            .and_then(Value::as_str)
            .ok_or(Error::InvalidToken("no service account"))?;
        let uid = k8s
            .pointer("/serviceaccount/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut extra = std::collections::BTreeMap::new();
        if let Some(jti) = claims["jti"].as_str() {
            extra.insert(
                "authentication.kubernetes.io/credential-id".to_string(),
                vec![format!("JTI={jti}")],
            );
        }
        let mut bound = None;
        for kind in [BoundKind::Pod, BoundKind::Secret] {
            let Some(object) = k8s.get(kind.claim()) else {
                continue;
            };
            let field = |k: &str| object[k].as_str().filter(|v| !v.is_empty());
            let (Some(name), Some(uid), None) = (field("name"), field("uid"), &bound) else {
                return Err(Error::InvalidToken("malformed bound object"));
            };
            if kind == BoundKind::Pod {
                extra.insert(
                    "authentication.kubernetes.io/pod-name".to_string(),
                    vec![name.to_string()],
                );
                extra.insert(
                    "authentication.kubernetes.io/pod-uid".to_string(),
                    vec![uid.to_string()],
                );
            }
            bound = Some(BoundObject {
                kind,
                name: name.to_string(),
                uid: uid.to_string(),
            });
        }
        let user = UserInfo {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            uid: uid.into(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
            extra,
        };
        Ok(Verified {
            user,
            bound,
            audiences: matched,
            expires: time("exp"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

    fn account(bound: Option<BoundObject>) -> Account {
        Account {
            namespace: "ns".into(),
            name: "builder".into(),
            uid: "u-1".into(),
            bound,
        }
    }

    #[test]
    fn a_bound_token_names_its_object() {
        let key = rcgen::KeyPair::generate().unwrap();
        let signer = Signer::new(key.serialize_pem().as_bytes(), ISSUER).unwrap();
        let verifier = Verifier::new(key.public_key_pem().as_bytes(), ISSUER).unwrap();
        let pod = BoundObject {
            kind: BoundKind::Pod,
            name: "web".into(),
            uid: "p-1".into(),
        };
        let token = signer
            .token(
                &account(Some(pod.clone())),
                &[ISSUER.to_string()],
                1000,
                3600,
            )
            .unwrap();
        let verified = verifier
            .verify_for(&token, 1100, &[ISSUER.to_string()])
            .unwrap();
        assert_eq!(verified.bound, Some(pod));
        assert_eq!(
            verified.user.extra["authentication.kubernetes.io/pod-name"],
            vec!["web".to_string()]
        );
        let unbound = signer
            .token(&account(None), &[ISSUER.to_string()], 1000, 3600)
            .unwrap();
        let verified = verifier
            .verify_for(&unbound, 1100, &[ISSUER.to_string()])
            .unwrap();
        assert_eq!(verified.bound, None);
        assert!(
            !verified
                .user
                .extra
                .contains_key("authentication.kubernetes.io/pod-name")
        );
    }

    #[test]
    fn tokens_round_trip_and_are_checked() {
        let key = rcgen::KeyPair::generate().unwrap();
        let signer = Signer::new(key.serialize_pem().as_bytes(), ISSUER).unwrap();
        let verifier = Verifier::new(key.public_key_pem().as_bytes(), ISSUER).unwrap();
        let token = signer
            .token(&account(None), &[ISSUER.to_string()], 1000, 3600)
            .unwrap();
        let user = verifier.verify(&token, 1100).unwrap();
        assert_eq!(user.name, "system:serviceaccount:ns:builder");
        assert!(
            user.groups
                .contains(&"system:serviceaccounts:ns".to_string())
        );
        assert!(matches!(
            verifier.verify(&token, 5000),
            Err(Error::InvalidToken("expired or not yet valid"))
        ));
        let mut tampered = token.clone();
        tampered.replace_range(token.len() - 5.., "AAAAA");
        assert!(verifier.verify(&tampered, 1100).is_err());
        let other = signer
            .token(&account(None), &["someone-else".to_string()], 1000, 3600)
            .unwrap();
        assert!(matches!(
            verifier.verify(&other, 1100),
            Err(Error::InvalidToken("wrong audience"))
        ));
    }
}
