//! generic-server: the base every kubechain server is built on.
//!
//! It holds the request pipeline (request info, authentication,
//! authorization, admission, handler), the generic REST store with one
//! [`strategy::Strategy`] per resource, etcd storage with its watch cache,
//! discovery, OpenAPI, Table output, Status errors, and both ends of the
//! gRPC delegation protocol.

pub mod admission;
pub mod audit;
pub mod codec;
pub mod config;
pub mod delegation;
pub mod discovery;
pub mod error;
pub mod filters;
pub mod handlers;
pub mod health;
pub mod informer;
pub mod jwt;
pub mod leader;
pub mod loopback;
pub mod metrics;
pub mod mirror;
pub mod pipeline;
pub mod plain_listener;
pub mod protobuf;
pub mod registration;
pub mod registry;
pub mod replica;
pub mod request;
pub mod request_info;
pub mod resource;
pub mod rest;
pub mod router;
pub mod runtime;
pub mod server;
pub mod service_client;
pub mod shutdown;
pub mod storage;
pub mod strategy;
#[cfg(test)]
pub mod testing;
pub mod tls;
pub mod trace;
pub mod upstream;
pub mod version;
pub mod watch_event;
pub mod watch_hub;

pub use error::{Error, Result};
