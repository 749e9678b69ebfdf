//! The core server's own admission plugins (kube's built-in plugins for
//! built-in resources); the chain that runs them is set in `main.rs`.

pub mod limit_ranger;
