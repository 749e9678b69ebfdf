//! The front door's filters, one per file: the request path's check, then
//! authentication (the cluster's, or an aggregated server's front-proxy
//! `requestheader`), then authorization. Their order is fixed in [`crate::pipeline::Pipeline`].

pub mod authentication;
pub mod authorization;
pub mod request_path;
pub mod requestheader;
