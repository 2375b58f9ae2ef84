package policy

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// OrphanedAtAnnotation records on a dependent when cascade first found every owner gone, for
// collect: After, so that a restart of cascade neither forgets nor restarts the delay. Its
// value is FormatOrphanedAt's: "2026-05-01T10:00:00Z owners=<uid>,<uid>". It is valid only for
// the owners it names: a dependent that gains other owners and loses them again waits anew.
const OrphanedAtAnnotation = "cascade.dev/orphaned-at"

const ownersMarker = " owners="

// FormatOrphanedAt renders the OrphanedAtAnnotation value for time t and the owner UIDs gone.
// The time is rounded up to the second (the precision of RFC 3339 as written here), so the
// delay is never cut short.
func FormatOrphanedAt(t time.Time, owners []types.UID) string {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		t = r.Add(time.Second)
	}
	return t.UTC().Format(time.RFC3339) + ownersMarker + ownerList(owners)
}

// ParseOrphanedAt reads an OrphanedAtAnnotation value. It returns false when the value is
// malformed or names owners other than owners (the dependent's owner UIDs now).
func ParseOrphanedAt(value string, owners []types.UID) (time.Time, bool) {
	ts, list, ok := strings.Cut(value, ownersMarker)
	if !ok || list != ownerList(owners) {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// ownerList is the owner UIDs sorted, each once, comma-separated.
func ownerList(owners []types.UID) string {
	s := make([]string, 0, len(owners))
	for _, o := range owners {
		s = append(s, string(o))
	}
	slices.Sort(s)
	return strings.Join(slices.Compact(s), ",")
}

// collectNever keeps a dependent whose owners are all gone (or waiting), which the built-in
// rules would delete: the references to them are removed instead, so a foreground owner is
// not left waiting. References naming a kind without REST mapping stay (keepUnmappedOwners
// keeps the dependent when nothing else is left to remove).
func collectNever(in Input) (Decision, bool) {
	if in.Collect.Mode != CollectNever || !in.ownersGone() {
		return Decision{}, false
	}
	uids, unmapped := in.resolvable(in.removable())
	if len(uids) == 0 {
		return Decision{}, false
	}
	return Decision{Action: RemoveRefs, Reason: ReasonCollectNever, Owners: uids, Unmapped: unmapped}, true
}

// collectAfter keeps a dependent the built-in rules would delete until Collect.After has
// passed since its owners were found gone; then it does not apply and the built-in rules
// delete. A recorded time in the future (clock skew, a hand edit) counts as now.
func collectAfter(in Input) (Decision, bool) {
	if in.Collect.Mode != CollectAfter || !in.collectable() {
		return Decision{}, false
	}
	if in.OrphanedAt.IsZero() {
		return Decision{Action: RecordOrphanedAt, Reason: ReasonCollectAfter, After: in.Collect.After}, true
	}
	left := min(in.OrphanedAt.Add(in.Collect.After).Sub(in.Now), in.Collect.After)
	if left <= 0 {
		return Decision{}, false
	}
	return Decision{Action: Requeue, Reason: ReasonCollectAfter, After: left}, true
}
