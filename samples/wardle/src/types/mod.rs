//! `wardle.example.com`: its kinds in each version it serves.

pub mod v1alpha1;
pub mod v1beta1;

/// The API group.
pub const GROUP: &str = "wardle.example.com";
