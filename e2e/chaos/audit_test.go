//go:build e2e

package chaos

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// auditLine is one audit event as kube-apiserver logs it, for the checker's tests.
func auditLine(t *testing.T, at time.Time, verb, resource, ns, name string, code int, req any) string {
	t.Helper()
	return auditStage(t, "ResponseComplete", name+at.String(), at, verb, resource, ns, name, code, req)
}

// auditStage is auditLine at any stage, with its audit ID; code 0 means no responseStatus.
func auditStage(t *testing.T, stage, id string, at time.Time, verb, resource, ns, name string, code int, req any) string {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	e := map[string]any{
		"stage": stage, "auditID": id, "verb": verb, "user": map[string]any{"username": cascadeUser},
		"objectRef":                map[string]any{"resource": resource, "namespace": ns, "name": name, "apiGroup": map[string]string{"replicasets": "apps", "deployments": "apps"}[resource]},
		"requestObject":            json.RawMessage(body),
		"requestReceivedTimestamp": at.Format(metav1.RFC3339Micro),
		"stageTimestamp":           at.Add(5 * time.Millisecond).Format(metav1.RFC3339Micro),
	}
	if code != 0 {
		e["responseStatus"] = map[string]any{"code": code}
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkLines runs the audit check on an audit log made of lines, for driver d.
func checkLines(t *testing.T, d *driver, lines []string) *auditResult {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := checkAudit(path, d)
	if err != nil {
		t.Fatal(err)
	}
	return res
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
	res := checkLines(t, d, lines)
	if res.deletes != 1 || len(res.wrongDeletes) != 0 {
		t.Errorf("deletes %d, wrongful %v; want 1 justified (its owner rs-1529 was being deleted in the foreground)", res.deletes, res.wrongDeletes)
	}
	removals := res.refRemovals

	// An unblock (a strategic merge patch naming the object's UID, the blocking references it
	// unblocks and, as a precondition, a resourceVersion) removes nothing: it is not read as a
	// merge patch replacing the list with the one reference it names, which would have removed
	// the reference to dep-6050 while it was alive.
	unblock := map[string]any{"metadata": map[string]any{"uid": x.UID, "resourceVersion": "27960", "ownerReferences": []any{
		map[string]any{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner.Name, "uid": owner.UID, "blockOwnerDeletion": false}}}}
	withUnblock := append([]string{auditLine(t, at(10), "patch", "replicasets", "chaos-b", x.Name, 200, unblock)}, lines...)
	res = checkLines(t, d, withUnblock)
	if res.refRemovals != removals || len(res.wrongRefRemovals) != 0 || len(res.wrongDeletes) != 0 {
		t.Errorf("with an unblock: removals %d (want %d), wrongful removals %v, wrongful deletes %v", res.refRemovals, removals, res.wrongRefRemovals, res.wrongDeletes)
	}

	// The same delete with the removal answered 200 (applied) had nothing to justify it: the
	// check still finds it.
	lines[1] = auditLine(t, at(5438), "patch", "replicasets", "chaos-b", x.Name, 200, smp(owner.UID))
	res = checkLines(t, d, lines)
	if len(res.wrongDeletes) != 1 || !strings.Contains(res.wrongDeletes[0], "no owner references") {
		t.Errorf("wrongful deletes %v; want the delete of an object without references", res.wrongDeletes)
	}
}

// TestAuditUnansweredDelete: the 20,000-operation run with seed 20261123. cascade's DELETE of
// garbage (sec-2286, whose owner never existed) was applied by a kube-apiserver killed before it
// answered: the audit log has only its RequestReceived event, and cascade's retry got 404. Its
// dependent, collected afterwards, was judged deleted "while its owner was alive". A request
// received and never answered may have been applied.
func TestAuditUnansweredDelete(t *testing.T) {
	secKind := kinds[1]
	if secKind.kind != "Secret" {
		t.Fatal("kinds reordered")
	}
	t0 := time.Date(2026, 11, 23, 8, 18, 38, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	mk := func(name, uid string, refs ...Ref) *record {
		return &record{Obj: &Obj{UID: uid, GK: secKind.gk(), Namespace: "chaos-b", Name: name, Refs: refs, Namespaced: true}, k: secKind}
	}
	never := Ref{APIVersion: "v1", Kind: "ConfigMap", Name: "cm-never-414", UID: "9465ad49-31db-4449-82c7-5a910c1b9912"}
	owner := mk("sec-2286", "034ece53-8b12-4a54-a247-cba7bf66ab57", never)
	dep := mk("sec-2287", "87c2a3ed-47e8-4337-9281-91bc000ff377", Ref{APIVersion: "v1", Kind: "Secret", Name: owner.Name, UID: owner.UID})
	d := &driver{recs: map[string]*record{owner.UID: owner, dep.UID: dep}, order: []string{owner.UID, dep.UID}}
	d.events = []event{
		{T0: at(217), T1: at(220), Op: "create", UID: owner.UID, Refs: owner.Refs},
		{T0: at(228), T1: at(231), Op: "create", UID: dep.UID, Refs: dep.Refs},
	}
	del := func(uid string) map[string]any {
		return map[string]any{"kind": "DeleteOptions", "preconditions": map[string]any{"uid": uid}, "propagationPolicy": "Background"}
	}
	lines := []string{
		auditStage(t, "RequestReceived", "lost", at(300), "delete", "secrets", "chaos-b", owner.Name, 0, del(owner.UID)),
		auditLine(t, at(1907), "delete", "secrets", "chaos-b", owner.Name, 404, del(owner.UID)),
		auditLine(t, at(5362), "delete", "secrets", "chaos-b", dep.Name, 200, del(dep.UID)),
	}
	for _, tc := range []struct {
		name  string
		lines []string
		wrong int
	}{{"unanswered delete logged", lines, 0}, {"no trace of it", lines[1:], 1}} {
		res := checkLines(t, d, tc.lines)
		if res.deletes+res.maybeDeletes == 0 {
			t.Fatalf("%s: no DELETE read", tc.name)
		}
		if len(res.wrongDeletes) != tc.wrong {
			t.Errorf("%s: wrongful %v, want %d", tc.name, res.wrongDeletes, tc.wrong)
		}
	}
}

// TestAuditRetriedDelete: the CI form, seed 1. cascade's DELETE of rc-180 (background, its owners
// gone) was received by a kube-apiserver killed before it answered: only its RequestReceived
// event, whose body is not logged, is there. cascade's retry 2 s later was answered 200, and
// rc-180 was gone. cascade then collected cm-17, whose only owner was rc-180. The check kept the
// first DELETE alone, read its unknown policy as the ReplicationController's default (orphan),
// and reported cm-17 deleted "while its owner was alive". Every DELETE counts, and one whose body
// is unknown may have ended its object.
func TestAuditRetriedDelete(t *testing.T) {
	cmKind, rcKind := kinds[0], kinds[3]
	if cmKind.kind != "ConfigMap" || rcKind.kind != "ReplicationController" {
		t.Fatal("kinds reordered")
	}
	t0 := time.Date(2026, 11, 23, 9, 43, 34, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	never := Ref{APIVersion: "v1", Kind: "ReplicationController", Name: "rc-48", UID: "20349414-eb71-45e7-8522-586fe9e0c805"}
	rc := &record{Obj: &Obj{UID: "d060892c-d4de-43ac-afeb-812141844d9b", GK: rcKind.gk(), Namespace: "chaos-c", Name: "rc-180", Refs: []Ref{never}, Namespaced: true}, k: rcKind}
	toRC := Ref{APIVersion: "v1", Kind: "ReplicationController", Name: rc.Name, UID: rc.UID, Block: true}
	cm := &record{Obj: &Obj{UID: "8b8a8ba1-24d7-481e-9d4c-841dfac623e8", GK: cmKind.gk(), Namespace: "chaos-c", Name: "cm-17", Refs: []Ref{toRC}, Namespaced: true}, k: cmKind}
	d := &driver{recs: map[string]*record{rc.UID: rc, cm.UID: cm}, order: []string{cm.UID, rc.UID}}
	d.events = []event{
		{T0: at(-14400), T1: at(-14390), Op: "create", UID: cm.UID},
		{T0: at(949), T1: at(950), Op: "create", UID: rc.UID, Refs: rc.Refs},
		{T0: at(7673), T1: at(7675), Op: "refs", UID: cm.UID, Refs: cm.Refs},
	}
	background := map[string]any{"kind": "DeleteOptions", "preconditions": map[string]any{"uid": rc.UID, "resourceVersion": "912"}, "propagationPolicy": "Background"}
	lines := []string{
		auditStage(t, "RequestReceived", "lost", at(3895), "delete", "replicationcontrollers", "chaos-c", rc.Name, 0, nil),
		auditLine(t, at(5974), "delete", "replicationcontrollers", "chaos-c", rc.Name, 200, background),
		auditLine(t, at(11947), "delete", "configmaps", "chaos-c", cm.Name, 200, map[string]any{
			"kind": "DeleteOptions", "preconditions": map[string]any{"uid": cm.UID, "resourceVersion": "1155"}, "propagationPolicy": "Background"}),
	}
	for _, tc := range []struct {
		name  string
		lines []string
		wrong int
	}{
		{"unanswered DELETE, then its retry answered", lines, 0},
		{"only the unanswered DELETE (any policy)", []string{lines[0], lines[2]}, 0},
		{"no DELETE of rc-180", lines[2:], 1},
	} {
		res := checkLines(t, d, tc.lines)
		if len(res.wrongDeletes) != tc.wrong {
			t.Errorf("%s: wrongful %v, want %d", tc.name, res.wrongDeletes, tc.wrong)
		}
	}
}

// TestAuditForegroundFinishedEarly (issue 22, item 5): cascade's removal of an owner's
// foregroundDeletion finalizer is checked against the dependents that blocked it. The owner fg,
// deleted in the foreground, is referenced with blockOwnerDeletion by dep. Finishing fg while dep
// exists is a finding; it is not once cascade deleted dep (in the background), nor when cascade
// unblocked dep's reference while fg was already waiting (a cycle broken), but it is when the
// unblock came before fg's deletion (an unblock of a reference the decision never saw, issue 22
// item 2), and when dep, deleted in the foreground, had not finished.
func TestAuditForegroundFinishedEarly(t *testing.T) {
	k := kinds[0]
	t0 := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	mk := func(name, uid string) *record {
		return &record{Obj: &Obj{UID: uid, GK: k.gk(), Namespace: "chaos-a", Name: name, Namespaced: k.namespaced}, k: k}
	}
	fg, dep := mk("fg", "u-fg"), mk("dep", "u-dep")
	toFG := Ref{APIVersion: k.apiVersion, Kind: k.kind, Name: fg.Name, UID: fg.UID, Block: true}
	dep.Refs = []Ref{toFG}
	d := &driver{recs: map[string]*record{fg.UID: fg, dep.UID: dep}, order: []string{fg.UID, dep.UID}}
	d.events = []event{
		{T0: at(0), T1: at(5), Op: "create", UID: fg.UID},
		{T0: at(10), T1: at(15), Op: "create", UID: dep.UID, Refs: []Ref{toFG}},
		{T0: at(10000), T1: at(10005), Op: "delete", UID: fg.UID, Deletion: DeletedForeground},
	}
	finish := func(ms int, name string) string {
		return auditLine(t, at(ms), "patch", k.gvr.Resource, "chaos-a", name, 200, map[string]any{"metadata": map[string]any{"resourceVersion": "9", "finalizers": []string{}}})
	}
	del := func(ms int, name, uid, policy string) string {
		return auditLine(t, at(ms), "delete", k.gvr.Resource, "chaos-a", name, 200, map[string]any{
			"kind": "DeleteOptions", "preconditions": map[string]any{"uid": uid, "resourceVersion": "8"}, "propagationPolicy": policy})
	}
	unblock := func(ms int) string {
		return auditLine(t, at(ms), "patch", k.gvr.Resource, "chaos-a", dep.Name, 200, map[string]any{"metadata": map[string]any{"uid": dep.UID, "resourceVersion": "7", "ownerReferences": []any{
			map[string]any{"apiVersion": k.apiVersion, "kind": k.kind, "name": fg.Name, "uid": fg.UID, "blockOwnerDeletion": false}}}})
	}
	for _, tc := range []struct {
		name  string
		lines []string
		early int
	}{
		{"dep still there", []string{finish(10300, fg.Name)}, 1},
		{"dep deleted in the background first", []string{del(10200, dep.Name, dep.UID, "Background"), finish(10300, fg.Name)}, 0},
		{"dep deleted in the foreground, not finished", []string{del(10200, dep.Name, dep.UID, "Foreground"), finish(10300, fg.Name)}, 1},
		{"dep deleted in the foreground and finished first", []string{del(10200, dep.Name, dep.UID, "Foreground"), finish(10250, dep.Name), finish(10300, fg.Name)}, 0},
		{"dep's reference unblocked while fg waited", []string{unblock(10200), finish(10300, fg.Name)}, 0},
		// make test-chaos, seed 1 (wid-463): cascade's removal of dep's finalizer was received
		// and never answered (kube-apiserver killed), its body not logged: perhaps applied, so
		// dep was perhaps gone when fg was finished.
		{"dep deleted in the foreground, its finish never answered before", []string{del(10200, dep.Name, dep.UID, "Foreground"),
			auditStage(t, "RequestReceived", "lost", at(10250), "patch", k.gvr.Resource, "chaos-a", dep.Name, 0, nil), finish(10300, fg.Name)}, 0},
		{"dep deleted in the foreground, a write never answered after fg's finish", []string{del(10200, dep.Name, dep.UID, "Foreground"),
			finish(10300, fg.Name), auditStage(t, "RequestReceived", "lost", at(10400), "patch", k.gvr.Resource, "chaos-a", dep.Name, 0, nil)}, 1},
		{"dep's reference unblocked before fg's deletion", []string{unblock(50), finish(10300, fg.Name)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := checkLines(t, d, tc.lines)
			done := 1 + strings.Count(tc.name, "finished first") // dep's own finish counts too
			if res.foregroundDone != done || len(res.earlyForeground) != tc.early {
				t.Errorf("foreground finishes %d (want %d), early %q (want %d)", res.foregroundDone, done, res.earlyForeground, tc.early)
			}
		})
	}

	t.Run("blocking reference written just before the deletion: a watch race", func(t *testing.T) {
		d.events = append(d.events, event{T0: at(9000), T1: at(9005), Op: "refs", UID: dep.UID, Refs: []Ref{toFG}})
		res := checkLines(t, d, []string{finish(10300, fg.Name)})
		if len(res.earlyForeground) != 0 || res.foregroundRaces != 1 {
			t.Errorf("early %q, races %d; want none early and one race", res.earlyForeground, res.foregroundRaces)
		}
	})
}

// TestAuditCRDDeletion: two findings of the CI form (seed 1) that were the audit's, not
// cascade's. (1) cascade deleted rc-160, whose only reference named Gadget gad-6 in a version
// no API serves (v1alpha9), 15 s after the Gadget CRD was deleted: the kind was gone, so no such
// owner could exist (issue 22.4b), but the check exempted only the short-lived CRDs' kinds.
// (2) gad-32 carried the orphan finalizer (stamped) and its foreign finalizer when its CRD was
// deleted: the CRD's finalizer deleted it with default options, so the orphan finalizer decided,
// and cascade rightly removed the references to it; the check knew orphan deletions only from
// the driver's and cascade's DELETEs.
func TestAuditCRDDeletion(t *testing.T) {
	rcKind, gadKind := kinds[3], kinds[8]
	if rcKind.kind != "ReplicationController" || gadKind.kind != "Gadget" {
		t.Fatal("kinds reordered")
	}
	t0 := time.Date(2026, 11, 26, 9, 27, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	gad := &record{Obj: &Obj{UID: "u-gad", GK: gadKind.gk(), Name: "gad-6"}, k: gadKind}
	crdDelete := event{T0: at(1000), T1: at(1010), Op: "crd-delete", GK: gadKind.gk()}
	crdCreate := event{T0: at(5000), T1: at(5100), Op: "crd-create", GK: gadKind.gk()}
	deleteRC := func(ms int, uid string) string {
		return auditLine(t, at(ms), "delete", "replicationcontrollers", "chaos-a", "rc-160", 200, map[string]any{
			"kind": "DeleteOptions", "preconditions": map[string]any{"uid": uid, "resourceVersion": "8"}, "propagationPolicy": "Background"})
	}

	t.Run("a reference in a version nothing serves, to a kind whose CRD went", func(t *testing.T) {
		ref := Ref{APIVersion: crdGroup + "/v1alpha9", Kind: "Gadget", Name: gad.Name, UID: gad.UID}
		rc := &record{Obj: &Obj{UID: "u-rc", GK: rcKind.gk(), Namespace: "chaos-a", Name: "rc-160", Refs: []Ref{ref}, Namespaced: true}, k: rcKind}
		base := []event{
			{T0: at(0), T1: at(5), Op: "create", UID: gad.UID},
			{T0: at(10), T1: at(15), Op: "create", UID: rc.UID, Refs: []Ref{ref}},
		}
		for _, tc := range []struct {
			name    string
			events  []event
			deleted int
			wrong   int
		}{
			{"CRD still there: unresolvable, kept", nil, 16000, 1},
			{"deleted after the CRD went", []event{crdDelete}, 16000, 0},
			{"deleted before the CRD went", []event{crdDelete}, 900, 1},
			{"deleted after the CRD came back", []event{crdDelete, crdCreate}, 16000, 1},
			{"deleted between the CRD's going and its coming back", []event{crdDelete, crdCreate}, 3000, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				d := &driver{recs: map[string]*record{gad.UID: gad, rc.UID: rc}, order: []string{gad.UID, rc.UID}}
				d.events = append(slices.Clone(base), tc.events...)
				res := checkLines(t, d, []string{deleteRC(tc.deleted, rc.UID)})
				if res.deletes != 1 || len(res.wrongDeletes) != tc.wrong {
					t.Errorf("deletes %d, wrongful %q; want 1 delete, %d wrongful", res.deletes, res.wrongDeletes, tc.wrong)
				}
			})
		}
	})

	t.Run("an owner deleted with its CRD while it carried a GC finalizer", func(t *testing.T) {
		ref := Ref{APIVersion: gadKind.apiVersion, Kind: "Gadget", Name: gad.Name, UID: gad.UID}
		rc := &record{Obj: &Obj{UID: "u-rc", GK: rcKind.gk(), Namespace: "chaos-a", Name: "rc-160", Refs: []Ref{ref}, Namespaced: true}, k: rcKind}
		remove := auditLine(t, at(1500), "patch", "replicationcontrollers", "chaos-a", rc.Name, 200,
			map[string]any{"metadata": map[string]any{"uid": rc.UID, "ownerReferences": []any{map[string]any{"$patch": "delete", "uid": gad.UID}}}})
		for _, tc := range []struct {
			name        string
			own         string
			lines       []string
			wrongRemove int
			wrongDelete int
		}{
			{"orphan: the reference removed", "orphan", []string{remove}, 0, 0},
			{"orphan: the dependent deleted instead", "orphan", []string{deleteRC(1500, rc.UID)}, 0, 1},
			{"no GC finalizer, held by a foreign one: the reference removed", "", []string{remove}, 1, 0},
			// The CI form, seed 1 (a local run): gad-317 carried foregroundDeletion (stamped)
			// and its foreign finalizer when its CRD was deleted; the default options kept the
			// finalizer, so it was deleted in the foreground and cascade rightly deleted its
			// blocking dependent while the foreign finalizer still held it. The check waited
			// for the foreign finalizer's removal, as for a deletion in the background.
			{"foregroundDeletion: the dependent deleted", "foregroundDeletion", []string{deleteRC(1500, rc.UID)}, 0, 0},
			{"no GC finalizer, held by a foreign one: the dependent deleted", "", []string{deleteRC(1500, rc.UID)}, 0, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				d := &driver{recs: map[string]*record{gad.UID: gad, rc.UID: rc}, order: []string{gad.UID, rc.UID}}
				d.events = []event{
					{T0: at(0), T1: at(5), Op: "create", UID: gad.UID, Hold: true},
					{T0: at(10), T1: at(15), Op: "create", UID: rc.UID, Refs: []Ref{ref}},
					{T0: at(100), T1: at(105), Op: "refs", UID: gad.UID, Hold: true, Own: tc.own},
					crdDelete,
				}
				res := checkLines(t, d, tc.lines)
				if len(res.wrongRefRemovals) != tc.wrongRemove || len(res.wrongDeletes) != tc.wrongDelete {
					t.Errorf("wrongful removals %q (want %d), wrongful deletes %q (want %d)", res.wrongRefRemovals, tc.wrongRemove, res.wrongDeletes, tc.wrongDelete)
				}
			})
		}
	})
}

// TestTrace: a finding's evidence names the object, its owner, their events, the CRD events of
// the owner's kind and the audit log's requests about both, and nothing about other objects.
func TestTrace(t *testing.T) {
	rsKind, gadKind := kinds[5], kinds[len(kinds)-1]
	if rsKind.kind != "ReplicaSet" || gadKind.kind != "Gadget" {
		t.Fatal("kinds reordered")
	}
	t0 := time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	gad := &record{Obj: &Obj{UID: "uid-gad", GK: gadKind.gk(), Name: "gad-510"}, k: gadKind}
	x := &record{Obj: &Obj{UID: "uid-rs", GK: rsKind.gk(), Namespace: "chaos-b", Name: "rs-514", Namespaced: true,
		Refs: []Ref{{APIVersion: gadKind.apiVersion, Kind: "Gadget", Name: gad.Name, UID: gad.UID}}}, k: rsKind}
	other := &record{Obj: &Obj{UID: "uid-other", GK: rsKind.gk(), Namespace: "chaos-b", Name: "rs-1", Namespaced: true}, k: rsKind}
	d := &driver{recs: map[string]*record{gad.UID: gad, x.UID: x, other.UID: other}, order: []string{gad.UID, x.UID, other.UID}}
	d.events = []event{
		{T0: at(0), T1: at(5), Op: "create", UID: gad.UID},
		{T0: at(10), T1: at(15), Op: "create", UID: x.UID, Refs: x.Refs},
		{T0: at(20), T1: at(25), Op: "create", UID: other.UID},
		{T0: at(30), T1: at(35), Op: "crd-delete", GK: gadKind.gk()},
		{T0: at(40), T1: at(45), Op: "crd-create", GK: "other.dev/v1/Other"},
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	lines := []string{
		auditLine(t, at(50), "delete", "replicasets", "chaos-b", x.Name, 200, map[string]any{"propagationPolicy": "Background"}),
		auditLine(t, at(60), "delete", "replicasets", "chaos-b", other.Name, 200, map[string]any{}),
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := traceFinding(d, path, "gone: "+describe(x))
	for _, want := range []string{"ReplicaSet chaos-b/rs-514 uid uid-rs", "Gadget /gad-510 uid uid-gad", "0.010s..0.015s create",
		"0.030s..0.035s crd-delete " + gadKind.gk(), "audit 0.050s ResponseComplete delete replicasets chaos-b/rs-514 by " + cascadeUser + ": 200"} {
		if !strings.Contains(got, want) {
			t.Errorf("trace lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"rs-1 ", "rs-1:", "uid-other", "Other"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("trace names %q, which the finding is not about:\n%s", unwanted, got)
		}
	}
}

// TestAuditMaybeDeleteJudged: a DELETE (or a reference removal) cascade sent that the API server answered with a server
// error (504) or never answered is a decision all the same, and is judged like an answered one:
// before, it was only counted, so a wrongful decision whose request timed out went unseen by the
// audit check (the CI form, seed 1: rs-514 gone, the oracle's finding alone).
func TestAuditMaybeDeleteJudged(t *testing.T) {
	secKind := kinds[1]
	if secKind.kind != "Secret" {
		t.Fatal("kinds reordered")
	}
	t0 := time.Date(2026, 11, 26, 13, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	mk := func(name, uid string, refs ...Ref) *record {
		return &record{Obj: &Obj{UID: uid, GK: secKind.gk(), Namespace: "chaos-b", Name: name, Refs: refs, Namespaced: true}, k: secKind}
	}
	owner := mk("sec-1", "uid-owner")
	dep := mk("sec-2", "uid-dep", Ref{APIVersion: "v1", Kind: "Secret", Name: owner.Name, UID: owner.UID})
	d := &driver{recs: map[string]*record{owner.UID: owner, dep.UID: dep}, order: []string{owner.UID, dep.UID}}
	d.events = []event{
		{T0: at(0), T1: at(3), Op: "create", UID: owner.UID},
		{T0: at(10), T1: at(13), Op: "create", UID: dep.UID, Refs: dep.Refs},
	}
	del := map[string]any{"kind": "DeleteOptions", "preconditions": map[string]any{"uid": dep.UID}, "propagationPolicy": "Background"}
	for _, tc := range []struct {
		name string
		line string
	}{
		{"answered 504", auditLine(t, at(500), "delete", "secrets", "chaos-b", dep.Name, 504, del)},
		{"never answered", auditStage(t, "RequestReceived", "lost", at(500), "delete", "secrets", "chaos-b", dep.Name, 0, del)},
	} {
		res := checkLines(t, d, []string{tc.line})
		if res.maybeDeletes != 1 || len(res.wrongDeletes) != 1 || !strings.Contains(res.wrongDeletes[0], "was alive") {
			t.Errorf("%s: %d perhaps applied, wrongful %v; want 1 and the delete of a dependent whose owner was alive", tc.name, res.maybeDeletes, res.wrongDeletes)
		}
	}
	// A removal of the reference to the live owner, answered 504: judged too.
	smp := map[string]any{"metadata": map[string]any{"uid": dep.UID, "ownerReferences": []any{map[string]any{"$patch": "delete", "uid": owner.UID}}}}
	res := checkLines(t, d, []string{auditLine(t, at(500), "patch", "secrets", "chaos-b", dep.Name, 504, smp)})
	if res.refRemovals != 0 || len(res.wrongRefRemovals) != 1 {
		t.Errorf("removal answered 504: %d counted as applied, wrongful %v; want 0 and the removal of the reference to a live owner", res.refRemovals, res.wrongRefRemovals)
	}
}

// TestAuditDeletePrecondition: the CI form, seed 1. cascade sent DELETEs of a ReplicaSet and a
// Gadget during an etcd restart, answered 504, each with the resourceVersion precondition of the
// version it had judged; the driver had changed their references since (a reference to a live
// owner added, or every reference removed). The check judged each DELETE on the newer
// references, which the precondition would have refused. A DELETE with a resourceVersion
// precondition is judged on the version at that resourceVersion where the driver knows it;
// where it does not, on every version it may have met, as before. And (the CI form again,
// rc-603) one answered with a server error, or never, whose precondition names a version older
// than one the driver wrote and saw answered before the DELETE was received, is refused: not
// judged, counted apart.
func TestAuditDeletePrecondition(t *testing.T) {
	secKind := kinds[1]
	if secKind.kind != "Secret" {
		t.Fatal("kinds reordered")
	}
	t0 := time.Date(2026, 11, 28, 1, 35, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	mk := func(name, uid string) *record {
		return &record{Obj: &Obj{UID: uid, GK: secKind.gk(), Namespace: "chaos-b", Name: name, Namespaced: true}, k: secKind}
	}
	gone, live, dep := mk("sec-1", "uid-gone"), mk("sec-2", "uid-live"), mk("sec-3", "uid-dep")
	refGone := Ref{APIVersion: "v1", Kind: "Secret", Name: gone.Name, UID: gone.UID}
	refLive := Ref{APIVersion: "v1", Kind: "Secret", Name: live.Name, UID: live.UID}
	d := &driver{recs: map[string]*record{gone.UID: gone, live.UID: live, dep.UID: dep}, order: []string{gone.UID, live.UID, dep.UID}}
	base := []event{
		{T0: at(0), T1: at(3), Op: "create", UID: gone.UID, RV: "1"},
		{T0: at(5), T1: at(8), Op: "create", UID: live.UID, RV: "2"},
		{T0: at(10), T1: at(13), Op: "create", UID: dep.UID, Refs: []Ref{refGone}, RV: "3"},
		{T0: at(20), T1: at(23), Op: "delete", UID: gone.UID, Deletion: DeletedBackground},
	}
	for _, tc := range []struct {
		name   string
		change []Ref
		rv     string
		code   int
		wrong  bool
		// refused: the check shows the precondition refused it (counted, not judged)
		refused bool
		// late: the driver's newer version was answered after the DELETE was received
		late bool
	}{
		// The driver's newer version (5) was answered before the DELETE was received: the
		// precondition's version (3) is one the object had left, so the DELETE was refused.
		{"a live owner added since: refused, its version left before the DELETE", []Ref{refGone, refLive}, "3", 504, false, true, false},
		{"every reference removed since: refused, its version left before the DELETE", []Ref{}, "3", 504, false, true, false},
		{"a live owner added, the DELETE at the newer version", []Ref{refGone, refLive}, "5", 504, true, false, false},
		{"every reference removed, the DELETE at the newer version, applied", []Ref{}, "5", 200, true, false, false},
		{"a version the driver never saw: every version it may have met", []Ref{refGone, refLive}, "9", 504, true, false, false},
		// The CI form, seed 1 (rc-603): the precondition names a version between two of the
		// driver's (cascade's own patch, say), and the driver's later version was written before
		// the DELETE was received: the precondition refused it, whatever its answer.
		{"a version the driver never saw, written past before the DELETE: refused", []Ref{}, "4", 504, false, true, false},
		{"the same, never answered: refused", []Ref{}, "4", 0, false, true, false},
		{"the same, the driver's write answered after the DELETE was received: judged, on every version", []Ref{}, "4", 504, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refsAt := 410
			if tc.late {
				refsAt = 505
			}
			d.events = append(slices.Clone(base), event{T0: at(400), T1: at(refsAt), Op: "refs", UID: dep.UID, Refs: tc.change, RV: "5"})
			del := map[string]any{"kind": "DeleteOptions", "preconditions": map[string]any{"uid": dep.UID, "resourceVersion": tc.rv}, "propagationPolicy": "Background"}
			line := auditLine(t, at(500), "delete", "secrets", "chaos-b", dep.Name, tc.code, del)
			if tc.code == 0 { // received, never answered: only the RequestReceived stage
				line = auditStage(t, "RequestReceived", "lost", at(500), "delete", "secrets", "chaos-b", dep.Name, 0, del)
			}
			res := checkLines(t, d, []string{line})
			if got := len(res.wrongDeletes) == 1; got != tc.wrong {
				t.Errorf("wrongful deletes %q; want wrongful: %v", res.wrongDeletes, tc.wrong)
			}
			if got := res.refusedDeletes == 1; got != tc.refused {
				t.Errorf("%d refused by the precondition; want refused: %v", res.refusedDeletes, tc.refused)
			}
		})
	}
}

// TestAuditUnansweredDeleteOutlived: make test-chaos, seed 1 (dep-199). cascade's graph lagged
// while the apiserver restarted: it decided on a 33-second-old version (its owner gone) and sent
// DELETEs with that version's precondition, refused (409) while the driver had since removed
// every reference; the last DELETE was received and never answered (the apiserver killed), its
// body unknown. The driver then wrote the object again (same UID, not being deleted): the
// DELETE was not applied, and is not judged. Without that later write it is judged on every
// version the object may have had, as before; a later write whose answer was lost (the read
// that settled it) or a removal of the driver's finalizer (done on objects being deleted too)
// proves nothing. And a DELETE whose body is logged must carry both preconditions.
func TestAuditUnansweredDeleteOutlived(t *testing.T) {
	secKind := kinds[1]
	t0 := time.Date(2026, 11, 29, 21, 29, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	mk := func(name, uid string) *record {
		return &record{Obj: &Obj{UID: uid, GK: secKind.gk(), Namespace: "chaos-a", Name: name, Namespaced: true}, k: secKind}
	}
	gone, dep := mk("sec-1", "uid-gone"), mk("sec-2", "uid-dep")
	refGone := Ref{APIVersion: "v1", Kind: "Secret", Name: gone.Name, UID: gone.UID}
	d := &driver{recs: map[string]*record{gone.UID: gone, dep.UID: dep}, order: []string{gone.UID, dep.UID}}
	base := []event{
		{T0: at(0), T1: at(3), Op: "create", UID: gone.UID, RV: "1"},
		{T0: at(10), T1: at(13), Op: "create", UID: dep.UID, Refs: []Ref{refGone}, RV: "3"},
		{T0: at(20), T1: at(23), Op: "delete", UID: gone.UID, Deletion: DeletedBackground},
		{T0: at(400), T1: at(410), Op: "refs", UID: dep.UID, Refs: []Ref{}, RV: "5"},
	}
	for _, tc := range []struct {
		name  string
		later *event
		wrong bool
	}{
		{"written again after: not applied, not judged", &event{T0: at(9000), T1: at(9010), Op: "refs", UID: dep.UID, Refs: []Ref{refGone}, RV: "7"}, false},
		{"nothing written after: judged on the version with no references", nil, true},
		{"written after, its answer lost: judged", &event{T0: at(9000), T1: at(9500), Op: "refs", UID: dep.UID, Refs: []Ref{refGone}, RV: "7", Lost: true}, true},
		{"its finalizer removed after: judged", &event{T0: at(9000), T1: at(9010), Op: "unhold", UID: dep.UID, Refs: []Ref{}, RV: "7"}, true},
		// make test-chaos, seed 1 (cm-181): the driver's next write was its delete, at the
		// version it had just read.
		{"deleted by the driver after, at the version it read: not applied", &event{T0: at(9000), T1: at(9010), Op: "delete", UID: dep.UID, Deletion: DeletedBackground, RVChecked: true}, false},
		{"deleted by the driver after, by UID only: judged", &event{T0: at(9000), T1: at(9010), Op: "delete", UID: dep.UID, Deletion: DeletedForeground}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d.events = slices.Clone(base)
			if tc.later != nil {
				d.events = append(d.events, *tc.later)
			}
			del := map[string]any{"kind": "DeleteOptions", "preconditions": map[string]any{"uid": dep.UID, "resourceVersion": "3"}, "propagationPolicy": "Background"}
			lines := []string{
				auditLine(t, at(500), "delete", "secrets", "chaos-a", dep.Name, 409, del),
				// Received, never answered: no body at that stage.
				auditStage(t, "RequestReceived", "lost", at(600), "delete", "secrets", "chaos-a", dep.Name, 0, nil),
			}
			res := checkLines(t, d, lines)
			if got := len(res.wrongDeletes) == 1; got != tc.wrong {
				t.Errorf("wrongful deletes %q; want wrongful: %v", res.wrongDeletes, tc.wrong)
			}
			if got := res.refusedDeletes == 1; got == tc.wrong {
				t.Errorf("%d shown not applied; want %v", res.refusedDeletes, !tc.wrong)
			}
			if len(res.noPrecondition) != 0 {
				t.Errorf("DELETEs without preconditions: %q, want none", res.noPrecondition)
			}
		})
	}
	d.events = slices.Clone(base)
	del := map[string]any{"kind": "DeleteOptions", "preconditions": map[string]any{"uid": dep.UID}, "propagationPolicy": "Background"}
	res := checkLines(t, d, []string{auditLine(t, at(500), "delete", "secrets", "chaos-a", dep.Name, 200, del)})
	if len(res.noPrecondition) != 1 {
		t.Errorf("a DELETE with a UID precondition only: %q, want it named", res.noPrecondition)
	}
	// cascade's own object (a removed fleet member's orphan record), deleted by UID alone: not a
	// collection, not named.
	own := map[string]any{"kind": "DeleteOptions", "preconditions": map[string]any{"uid": "uid-cascade-record"}}
	res = checkLines(t, d, []string{auditLine(t, at(500), "delete", "secrets", "chaos-a", "cascade-record", 200, own)})
	if len(res.noPrecondition) != 0 {
		t.Errorf("cascade's own object deleted by UID: %q, want nothing named", res.noPrecondition)
	}
}
