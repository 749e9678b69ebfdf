//! core-server's own admission plugins, kube's built-in ones that need the
//! built-in resources (generic-server holds the ones every server shares).

pub mod pod_security;
