//! The delegation protocol between kubechain's servers, and the Kubernetes
//! protobuf schemas.
//!
//! `delegation.proto` and `k8s/*.proto` are compiled by protox at build time;
//! nothing here is written by hand except this wrapper, [`k8s`] (Kubernetes
//! protobuf bodies decoded to JSON, and JSON encoded as kube's protobuf
//! answers), and [`openapi_v2::encode`].

/// The generated messages and the `Delegation` service.
#[allow(missing_docs, clippy::all)]
pub mod delegation {
    tonic::include_proto!("kubechain.delegation.v1");
}

pub mod k8s;
pub mod openapi_v2;

/// The encoded `FileDescriptorSet` of every Kubernetes proto package in `k8s/`.
pub const K8S_FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/k8s_descriptor_set.bin"));
