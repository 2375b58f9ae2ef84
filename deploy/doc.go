// Package deploy holds cascade's manifests: base/ (kustomize: Namespace, ServiceAccount, RBAC
// as narrow as collection allows, Deployment with leader election, metrics Service) and
// monitoring/ (Prometheus alert rules and a Grafana dashboard). Its test checks that every
// cascade metric the monitoring files use exists in the code.
package deploy
