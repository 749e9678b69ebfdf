//! Health checks: what `/healthz`, `/livez` and `/readyz` run, each by name.

use std::sync::Arc;

use futures::future::BoxFuture;

/// A named health check's test: `Err` says why it fails (logged, never shown).
pub type HealthCheck = Arc<dyn Fn() -> BoxFuture<'static, crate::Result<()>> + Send + Sync>;
