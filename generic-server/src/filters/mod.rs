//! The front door's filters, one per file: authentication, then
//! authorization. Their order is fixed in [`crate::front_door::FrontDoor`].

pub mod authentication;
pub mod authorization;
