// Package features says which level of each version-dependent feature of the API server
// cascade uses, and shows it: a log line when a level is chosen or changes, the gauge
// cascade_feature_in_use{feature,level} (1 for each level in use, 0 for the others) and a
// summary for /readyz (Set.Summary). docs/compatibility.md lists the levels per Kubernetes
// version and what each fallback costs.
//
// Features and their levels, best first:
//   - admission_policy: the MutatingAdmissionPolicy that stamps the policy's defaultPropagation
//     at creation, at admissionregistration.k8s.io v1 (served from Kubernetes 1.36), else v1beta1
//     (1.34 and 1.35 when turned on), else none: the stamping pass alone. Detected from
//     discovery (DetectAdmission) at start and on every discovery round; package
//     finalizers/stamp writes the objects at the level in use.
//   - list: how each watched resource is listed, a watch-list (a watch with
//     sendInitialEvents, served from kube-apiserver's watch cache) else pages. Learnt from the
//     server's answer to each list (package gc); both levels are 1 when some resources use one
//     and some the other (an aggregated API that refuses watch-lists, say).
//
// Invariant: a detection that fails keeps the level in use (or none known yet), and an
// unknown admission level writes no admission object: a wrong guess could only lose stamps the
// pass puts back, never remove one, but cascade does not guess.
//
// Set is safe for concurrent use.
package features
