"""``taskbench deploy k8s``: the manifests of a run on a Kubernetes cluster (docs/scale-out.md)."""
