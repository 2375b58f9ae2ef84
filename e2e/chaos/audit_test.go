//go:build e2e

package chaos

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// auditLine is one audit event as kube-apiserver logs it, for the checker's tests.
func auditLine(t *testing.T, at time.Time, verb, resource, ns, name string, code int, req any) string {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	e := map[string]any{
		"stage": "ResponseComplete", "verb": verb, "user": map[string]any{"username": cascadeUser},
		"objectRef":                map[string]any{"resource": resource, "namespace": ns, "name": name, "apiGroup": "apps"},
		"responseStatus":           map[string]any{"code": code},
		"requestObject":            json.RawMessage(body),
		"requestReceivedTimestamp": at.Format(metav1.RFC3339Micro),
		"stageTimestamp":           at.Add(5 * time.Millisecond).Format(metav1.RFC3339Micro),
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAuditMaybeAppliedRemoval: the 20,000-operation run with seed 424242. cascade tried to remove
// the reference to a ReplicaSet being deleted in the foreground (the dependent had another,
// solid owner: in-tree's stale references) and was answered 504; the patch was not applied.
// Once the other reference went, cascade deleted the dependent in the foreground, as it must.
// The check took the 504 removal as applied and reported "it had no owner references". A write
// answered with a server error may or may not have been applied: both readings are candidates.
func TestAuditMaybeAppliedRemoval(t *testing.T) {
	rsKind := kinds[5]
	depKind := kinds[4]
	if rsKind.kind != "ReplicaSet" || depKind.kind != "Deployment" {
		t.Fatal("kinds reordered")
	}
	t0 := time.Date(2026, 11, 23, 7, 13, 48, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	mk := func(k *kindDef, name, uid string, refs ...Ref) *record {
		return &record{Obj: &Obj{UID: uid, GK: k.gk(), Namespace: "chaos-b", Name: name, Refs: refs, Namespaced: true}, k: k}
	}
	dep := mk(depKind, "dep-6050", "75b3cc75-d087-4d9c-a398-6044ada497d0")
	owner := mk(rsKind, "rs-1529", "1b1edc06-6228-4a6c-a877-efe19baab065")
	refDep := Ref{APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Block: true}
	refOwner := Ref{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner.Name, UID: owner.UID, Block: true}
	x := mk(rsKind, "rs-6052", "8c07c463-782d-4f29-86be-5ad9ed93f020", refDep, refOwner)
	d := &driver{recs: map[string]*record{dep.UID: dep, owner.UID: owner, x.UID: x}, order: []string{dep.UID, owner.UID, x.UID}}
	d.events = []event{
		{T0: at(-200), T1: at(-190), Op: "create", UID: dep.UID},
		{T0: at(-100), T1: at(-90), Op: "create", UID: owner.UID},
		{T0: at(0), T1: at(3), Op: "create", UID: x.UID, Refs: []Ref{refDep, refOwner}},
		{T0: at(4331), T1: at(4338), Op: "delete", UID: dep.UID, Deletion: DeletedOrphan},
		{T0: at(4356), T1: at(4364), Op: "delete", UID: owner.UID, Deletion: DeletedForeground},
	}
	smp := func(owner string) map[string]any {
		return map[string]any{"metadata": map[string]any{"uid": x.UID, "ownerReferences": []any{map[string]any{"$patch": "delete", "uid": owner}}}}
	}
	lines := []string{
		auditLine(t, at(5179), "patch", "replicasets", "chaos-b", x.Name, 200, smp(dep.UID)),   // orphaning dep-6050
		auditLine(t, at(5438), "patch", "replicasets", "chaos-b", x.Name, 504, smp(owner.UID)), // stale reference: not applied
		auditLine(t, at(13649), "delete", "replicasets", "chaos-b", x.Name, 200, map[string]any{
			"kind": "DeleteOptions", "preconditions": map[string]any{"uid": x.UID, "resourceVersion": "27961"}, "propagationPolicy": "Foreground"}),
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := checkAudit(path, d)
	if err != nil {
		t.Fatal(err)
	}
	if res.deletes != 1 || len(res.wrongDeletes) != 0 {
		t.Errorf("deletes %d, wrongful %v; want 1 justified (its owner rs-1529 was being deleted in the foreground)", res.deletes, res.wrongDeletes)
	}

	// The same delete with the removal answered 200 (applied) had nothing to justify it: the
	// check still finds it.
	lines[1] = auditLine(t, at(5438), "patch", "replicasets", "chaos-b", x.Name, 200, smp(owner.UID))
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err = checkAudit(path, d); err != nil {
		t.Fatal(err)
	}
	if len(res.wrongDeletes) != 1 || !strings.Contains(res.wrongDeletes[0], "no owner references") {
		t.Errorf("wrongful deletes %v; want the delete of an object without references", res.wrongDeletes)
	}
}
