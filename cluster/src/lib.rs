//! Cluster providers: where a scenario's Kubernetes API comes from.
