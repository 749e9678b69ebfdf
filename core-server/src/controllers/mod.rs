//! The core server's controllers, each an actor fed by an informer.

pub mod serviceaccount;
