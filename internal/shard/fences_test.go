package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLostTakeReply: a replica takes the shards of one whose renewals fail, but the replies
// to its takes are lost (the writes are stored). It finds its own name in the Leases and
// takes them again, and still opens no gate before LeaseDuration after the other's writers'
// last possible write (RenewDeadline after its last renewal).
func TestLostTakeReply(t *testing.T) {
	f := newFleet(t, 6)
	a, b := f.add("a"), f.add("b")
	f.ticks(20, "split 3/3", func() bool { return f.split(3, 3) })
	lost := b.m.Held()
	renewed := f.clk.Now()
	f.api.setFail(func(verb string, l *coordv1.Lease) error {
		if holderOf(l) == b.id {
			return apierrors.NewInternalError(errors.New("etcd is down"))
		}
		return nil
	})
	replied := map[string]bool{}
	var mu sync.Mutex
	f.api.setLose(func(verb string, l *coordv1.Lease) error {
		mu.Lock()
		defer mu.Unlock()
		// a's first take of each shard: its AcquireTime is its RenewTime.
		if holderOf(l) != a.id || !l.Spec.AcquireTime.Equal(l.Spec.RenewTime) || replied[l.Name] {
			return nil
		}
		replied[l.Name] = true
		return apierrors.NewServerTimeout(leasesGVR.GroupResource(), verb, 1)
	})
	f.ticks(int((2*leaseDuration+renewDeadline)/retryPeriod), "held by a alone", func() bool { return len(a.m.Held()) == 6 })
	mu.Lock()
	if len(replied) != len(lost) {
		t.Errorf("replies lost for %v, want one for each of %v", replied, lost)
	}
	mu.Unlock()
	for _, i := range lost {
		if s := f.opened(a.id, i); s.openedAt.Before(renewed.Add(leaseDuration + renewDeadline)) {
			t.Errorf("a opened shard %d at %s, before b's last renewal + LeaseDuration + RenewDeadline", i, s.openedAt.Format(time.TimeOnly))
		}
	}
}

// TestLeaseDeleted: the Lease of a shard held by a live replica is deleted (kubectl delete
// lease); the replica below its share takes the shard at once, but opens its gate only
// LeaseDuration after the holder's writers may have stopped (RenewDeadline after it may
// have renewed, just before the deletion).
func TestLeaseDeleted(t *testing.T) {
	f, big, small := splitTwoOne(t)
	i := big.m.Held()[0]
	deleted := f.clk.Now()
	if err := f.api.CoordinationV1().Leases("cascade").Delete(context.Background(), shardLeaseName("cascade", i), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.ticks(int((2*leaseDuration+renewDeadline)/retryPeriod), fmt.Sprintf("shard %d held by %s", i, small.id), func() bool { return slices.Contains(small.m.Held(), i) })
	s := f.opened(small.id, i)
	t.Logf("shard %d: Lease deleted at %s, %s opened it %s later", i, deleted.Format(time.TimeOnly), small.id, s.openedAt.Sub(deleted))
	if s.openedAt.Before(deleted.Add(leaseDuration + renewDeadline)) {
		t.Errorf("%s opened shard %d at %s, before the deletion + LeaseDuration + RenewDeadline", small.id, i, s.openedAt.Format(time.TimeOnly))
	}
	if len(big.m.Held()) != 1 {
		t.Errorf("%s holds %v, want one shard", big.id, big.m.Held())
	}
}

// TestLeaseRewritten: the Lease of a shard held by a live replica is rewritten by someone
// else to name the replica below its share (kubectl edit). That one finds its own name in
// it, but opens its gate only LeaseDuration after the holder's writers may have stopped.
func TestLeaseRewritten(t *testing.T) {
	f, big, small := splitTwoOne(t)
	i := big.m.Held()[0]
	leases := f.api.CoordinationV1().Leases("cascade")
	l, err := leases.Get(context.Background(), shardLeaseName("cascade", i), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := small.id
	l.Spec.HolderIdentity = &id
	rewritten := f.clk.Now()
	if _, err := leases.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.ticks(int((2*leaseDuration+renewDeadline)/retryPeriod), fmt.Sprintf("shard %d held by %s", i, small.id), func() bool { return slices.Contains(small.m.Held(), i) })
	s := f.opened(small.id, i)
	t.Logf("shard %d: Lease rewritten at %s, %s opened it %s later", i, rewritten.Format(time.TimeOnly), small.id, s.openedAt.Sub(rewritten))
	if s.openedAt.Before(rewritten.Add(leaseDuration + renewDeadline)) {
		t.Errorf("%s opened shard %d at %s, before the rewrite + LeaseDuration + RenewDeadline", small.id, i, s.openedAt.Format(time.TimeOnly))
	}
}

// TestShardCountChangeLostHolder: a replica counting 7 shards waits beside one counting 6;
// the latter's renewals fail. Its shard Leases map members differently, so they bound every
// shard of the former: it opens none (not even shard 6, which has no Lease of the 6) before
// LeaseDuration after the latter's writers' last possible write.
func TestShardCountChangeLostHolder(t *testing.T) {
	f := newFleet(t, 6)
	a := f.add("a")
	f.ticks(20, "all held", func() bool { return len(a.m.Held()) == 6 })
	b := f.addCounting("b", 7)
	for range 3 {
		f.tick()
	}
	renewed := f.clk.Now()
	f.api.setFail(func(verb string, l *coordv1.Lease) error {
		if holderOf(l) == a.id {
			return apierrors.NewInternalError(errors.New("etcd is down"))
		}
		return nil
	})
	f.ticks(int((3*leaseDuration+renewDeadline)/retryPeriod), "held by b alone", func() bool { return len(b.m.Held()) == 7 })
	for i := range 7 {
		if s := f.opened(b.id, i); s.openedAt.Before(renewed.Add(leaseDuration + renewDeadline)) {
			t.Errorf("b opened shard %d at %s, before a's last renewal + LeaseDuration + RenewDeadline", i, s.openedAt.Format(time.TimeOnly))
		}
	}
}

// splitTwoOne is a fleet of 3 shards over two replicas once they split them 2/1: big holds two,
// small one.
func splitTwoOne(t *testing.T) (f *fleet, big, small *replica) {
	t.Helper()
	f = newFleet(t, 3)
	a, b := f.add("a"), f.add("b")
	f.ticks(20, "split 2/1", func() bool { return f.split(1, 2) })
	if len(b.m.Held()) == 2 {
		return f, b, a
	}
	return f, a, b
}
