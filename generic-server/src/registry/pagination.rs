//! List pagination: `limit` and kube-compatible continue tokens.

use super::*;

/// Encodes a continue token as kube does: base64 of `{"v","rv","start"}`.
pub fn encode_continue(revision: i64, start: &str) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": revision, "start": start});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

pub(super) fn decode_continue(token: &str) -> Result<(i64, String)> {
    let bad = || {
        Error::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let revision = value
        .get("rv")
        .and_then(Value::as_i64)
        .filter(|r| *r > 0)
        .ok_or_else(bad)?;
    let start = value.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    if start.contains("..") || start.starts_with('/') {
        return Err(bad());
    }
    Ok((revision, start.to_string()))
}

impl Store {
    pub(super) fn paginate(
        &self,
        mut items: Vec<Arc<CachedObject>>,
        revision: i64,
        limit: usize,
    ) -> ListResult {
        if limit == 0 || items.len() <= limit {
            return ListResult {
                items,
                revision,
                continue_token: None,
                remaining: None,
            };
        }
        let remaining = (items.len() - limit) as i64;
        items.truncate(limit);
        let token = self.continue_after(&items, revision);
        ListResult {
            items,
            revision,
            continue_token: Some(token),
            remaining: Some(remaining),
        }
    }

    /// The result of a page read from the cache, its objects as served.
    pub(super) async fn from_page(&self, page: Page) -> Result<ListResult> {
        let continue_token = page
            .more
            .then(|| self.continue_after(&page.objects, page.revision));
        Ok(ListResult {
            continue_token,
            remaining: page.remaining,
            revision: page.revision,
            items: self.present(page.objects).await?,
        })
    }

    /// The token that continues a list at `revision` after the last of `items`.
    fn continue_after(&self, items: &[Arc<CachedObject>], revision: i64) -> String {
        let last = items
            .last()
            .map(|o| &o.key[self.prefix.len()..])
            .unwrap_or_default();
        encode_continue(revision, &format!("{last}\0"))
    }
}
