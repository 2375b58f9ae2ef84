//go:build e2e

package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// trace is the evidence for a finding on the object uid, short enough for a CI log that keeps
// only the failure's lines: the driver's record and events of the object and of every owner it
// ever referenced, the CRD events of those owners' kinds, and each request the API server's
// audit log holds about those objects by name (any user: the driver, cascade, the CRD
// finalizer). A finding in CI can then be judged without the control plane directory, which
// stays on the CI machine.
func trace(d *driver, auditLog string, uid string) string {
	r := d.recs[uid]
	if r == nil {
		return "  (unknown to the driver)"
	}
	uids := []string{uid}
	gks := map[string]bool{}
	addRefs := func(refs []Ref) {
		for _, ref := range refs {
			if !slices.Contains(uids, ref.UID) {
				uids = append(uids, ref.UID)
			}
			gks[groupKind(ref)] = true
		}
	}
	addRefs(r.Refs)
	for _, e := range d.events {
		if e.UID == uid {
			addRefs(e.Refs)
		}
	}
	start := time.Time{}
	if len(d.events) > 0 {
		start = d.events[0].T0
	}
	at := func(t time.Time) string { return fmt.Sprintf("%.3fs", t.Sub(start).Seconds()) }
	var b strings.Builder
	names := map[string]bool{}
	for _, u := range uids {
		o := d.recs[u]
		if o == nil {
			fmt.Fprintf(&b, "  %s: never created by the driver\n", u)
			continue
		}
		names[o.Name] = true
		fmt.Fprintf(&b, "  %s %s/%s uid %s: deletion %d observed %v own %q hold %v gone %v refs %v\n",
			o.k.kind, o.Namespace, o.Name, u, o.Deletion, o.DeletionObserved, o.Own, o.hold, o.gone, o.Refs)
		for _, e := range d.events {
			if e.UID == u {
				fmt.Fprintf(&b, "    %s..%s %s refs %v own %q hold %v deletion %d\n", at(e.T0), at(e.T1), e.Op, e.Refs, e.Own, e.Hold, e.Deletion)
			}
		}
	}
	for _, e := range d.events {
		if (e.Op == "crd-delete" || e.Op == "crd-create") && gks[groupKind(refOfGK(e.GK))] {
			fmt.Fprintf(&b, "  %s..%s %s %s\n", at(e.T0), at(e.T1), e.Op, e.GK)
		}
	}
	f, err := os.Open(auditLog)
	if err != nil {
		fmt.Fprintf(&b, "  audit log: %v\n", err)
		return b.String()
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n := 0
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.ObjectRef == nil || !names[e.ObjectRef.Name] || e.Verb == "get" || e.Verb == "list" || e.Verb == "watch" {
			continue
		}
		if e.Stage != "ResponseComplete" && e.Stage != "RequestReceived" {
			continue
		}
		code := 0
		if e.ResponseStatus != nil {
			code = e.ResponseStatus.Code
		}
		if n++; n > 40 {
			continue
		}
		body := string(e.RequestObject)
		if len(body) > 240 {
			body = body[:240] + "..."
		}
		fmt.Fprintf(&b, "  audit %s %s %s %s %s/%s by %s: %d %s\n", at(e.RequestReceivedTimestamp.Time), e.Stage, e.Verb,
			e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name, e.User.Username, code, body)
	}
	if n > 40 {
		fmt.Fprintf(&b, "  audit: %d more lines not shown\n", n-40)
	}
	return b.String()
}

// traceFinding is trace for the first object a finding's text names by "uid X".
func traceFinding(d *driver, auditLog, finding string) string {
	_, rest, ok := strings.Cut(finding, " uid ")
	if !ok {
		return ""
	}
	uid, _, _ := strings.Cut(rest, " ")
	return "\n" + trace(d, auditLog, uid)
}
