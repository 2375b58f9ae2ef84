// Package deploy holds cascade's manifests: base/ (kustomize: Namespace enforcing the restricted
// Pod Security Standard, ServiceAccount, RBAC as narrow as collection allows, Deployment of the
// image `make image` builds with leader election, probes, resources and anti-affinity, a
// PodDisruptionBudget, metrics Service, the policy ConfigMap and the Role that reads it),
// overlays/shadow (--dry-run: one replica, RBAC that only reads), overlays/companion
// (--mode=companion: no delete but on cascade's admission objects) and overlays/fleet (fleet
// mode: the host RBAC it uses, and an egress NetworkPolicy to enable), components/monitoring
// (ServiceMonitor, PrometheusRule, dashboard ConfigMap), components/monitoring-verified-tls
// (cascade serves a certificate from a Secret, the ServiceMonitor verifies it), chart/ (the Helm chart, rendering the
// same objects in each mode) and monitoring/ (Prometheus alert rules, their promtool tests, and a
// Grafana dashboard: the one source of the chart's and the component's copies, which
// TestGeneratedMonitoring writes with -update and checks otherwise).
//
// chart/README.md documents every value of chart/values.yaml from the comment above its key
// (chartdoc; TestChartReadme writes it with -update, make generate, and checks it otherwise), and
// TestChartValuesInSchema checks that values.schema.json knows each value and refuses unknown
// keys.
//
// Its tests check that every cascade metric the monitoring files use exists in the code, that
// the rules name no job and have runbooks, and that the Deployment matches the image (name,
// user) and is hardened; the fleet tests render the chart with bin/helm (make helm, which they
// run: built once from tools/helm into ~/.cache/cascade-tools) and check fleet mode's host RBAC,
// insecure kubeconfig values and egress NetworkPolicy against the overlay; the e2e suite applies
// the base, the overlays and the chart with server dry runs, compares the chart with kustomize in
// each mode (e2e/chart_test.go), and runs the image as the Deployment does (e2e/image_test.go).
package deploy
