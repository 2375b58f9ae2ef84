// Package deploy holds cascade's manifests: base/ (kustomize: Namespace enforcing the restricted
// Pod Security Standard, ServiceAccount, RBAC as narrow as collection allows, Deployment of the
// image `make image` builds with leader election, probes, resources and anti-affinity, a
// PodDisruptionBudget, metrics Service, the policy ConfigMap and the Role that reads it) and
// monitoring/ (Prometheus alert rules and a Grafana dashboard). Its tests check that every cascade metric the monitoring files use exists in the
// code, and that the Deployment matches the image (name, user) and is hardened; the e2e suite
// applies the base and runs the image as the Deployment does (e2e/image_test.go).
package deploy
