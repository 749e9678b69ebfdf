//! The front door's filters, one per file: the request path's check, then
//! authentication (the cluster's, or an aggregated server's front-proxy
//! `requestheader`), then impersonation, then priority and fairness (at the
//! front door, in [`flowcontrol`]), then authorization (kube's Node authorizer, in [`node`], then RBAC's, in [`rbac`], asked in turn by [`authorization::Union`], or, on an aggregated server, the
//! front door's, in [`delegated`]). Their order is fixed in [`crate::pipeline::Pipeline`].

pub mod authentication;
pub mod authorization;
pub mod delegated;
pub mod flowcontrol;
pub mod impersonation;
pub mod node;
pub mod rbac;
pub mod request_path;
pub mod requestheader;
pub mod unread;
