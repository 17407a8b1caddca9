//! Embedded Kubernetes-compatible API server.
