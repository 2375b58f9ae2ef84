// Package framework is what cascade's e2e test packages share (e2e for the collector's
// behaviour and benchmarks, e2e/compare for the side-by-side comparison with the in-tree
// garbage collector), so that each helper exists once:
//
//   - Main, a TestMain that runs a package against one local control plane (Suite);
//   - Clients and the object helpers tests build scenarios with (namespaces, ConfigMaps,
//     owner references);
//   - Parallel, the one worker pool, for creating fixtures and for a benchmark's raw client;
//   - Poll, Eventually, Consistently and WaitGone, the waits;
//   - ParseMetrics and Metrics, the one reader of Prometheus text (cascade's,
//     kube-controller-manager's and kube-apiserver's /metrics), with MetricValue and
//     WaitForMetric for processes under test, Settled for the baseline of a delta (once a
//     process has worked through what earlier tests left), APIServerRequests for what
//     kube-apiserver served, and WaitInTreeGCSynced for kube-controller-manager's garbage
//     collector.
//
// Helpers that take a testing.TB fail the test themselves; the others return errors.
// Processes (etcd, kube-apiserver, cascade, kube-controller-manager) are started by package
// harness, which this package builds on and which knows nothing of tests.
package framework
