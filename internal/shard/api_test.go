package shard

import (
	"context"
	"errors"
	"strconv"
	"sync"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
)

var leasesGVR = coordv1.SchemeGroupVersion.WithResource("leases")

// apiServer is the fake clientset with what the protocol relies on and the fake lacks: a
// resourceVersion on every write of a Lease, and an Update whose resourceVersion is not the
// stored one fails with a conflict. Every successful write is passed to written.
type apiServer struct {
	*fake.Clientset
	mu sync.Mutex
	rv int
	// fail, if set, fails the writes it returns an error for (before they are stored).
	fail func(verb string, l *coordv1.Lease) error
	// written, if set, sees every successful create and update.
	written func(verb string, l *coordv1.Lease)
	// lose, if set, loses the replies it returns an error for: the write is stored, and
	// the client gets the error instead (a reply lost in the network, a timeout).
	lose func(verb string, l *coordv1.Lease) error
	// delay, if set, is called before each update sent through client(), outside the fake
	// clientset (which serves one request at a time): it may block, as a slow request does.
	delay func(verb string, l *coordv1.Lease)
}

// client is the Lease client of the replicas: the fake clientset's, its updates delayed by
// a.delay.
func (a *apiServer) client() coordinationv1.CoordinationV1Interface {
	return delayed{a.CoordinationV1(), a}
}

type delayed struct {
	coordinationv1.CoordinationV1Interface
	a *apiServer
}

func (d delayed) Leases(namespace string) coordinationv1.LeaseInterface {
	return delayedLeases{d.CoordinationV1Interface.Leases(namespace), d.a}
}

type delayedLeases struct {
	coordinationv1.LeaseInterface
	a *apiServer
}

func (d delayedLeases) Update(ctx context.Context, l *coordv1.Lease, opts metav1.UpdateOptions) (*coordv1.Lease, error) {
	d.a.mu.Lock()
	delay := d.a.delay
	d.a.mu.Unlock()
	if delay != nil {
		delay("update", l)
	}
	return d.LeaseInterface.Update(ctx, l, opts)
}

func newAPIServer() *apiServer {
	a := &apiServer{Clientset: fake.NewClientset()}
	a.PrependReactor("create", "leases", func(act k8stesting.Action) (bool, runtime.Object, error) {
		return a.write("create", act.(k8stesting.CreateAction).GetObject().(*coordv1.Lease))
	})
	a.PrependReactor("update", "leases", func(act k8stesting.Action) (bool, runtime.Object, error) {
		return a.write("update", act.(k8stesting.UpdateAction).GetObject().(*coordv1.Lease))
	})
	return a
}

func (a *apiServer) write(verb string, l *coordv1.Lease) (bool, runtime.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l = l.DeepCopy()
	if a.fail != nil {
		if err := a.fail(verb, l); err != nil {
			return true, nil, err
		}
	}
	tracker := a.Tracker()
	if verb == "create" {
		if l.ResourceVersion != "" {
			return true, nil, apierrors.NewBadRequest("resourceVersion may not be set on a create")
		}
	} else {
		cur, err := tracker.Get(leasesGVR, l.Namespace, l.Name)
		if err != nil {
			return true, nil, err
		}
		if cur.(*coordv1.Lease).ResourceVersion != l.ResourceVersion {
			return true, nil, apierrors.NewConflict(leasesGVR.GroupResource(), l.Name, errors.New("the object has been modified"))
		}
	}
	a.rv++
	l.ResourceVersion = strconv.Itoa(a.rv)
	var err error
	if verb == "create" {
		err = tracker.Create(leasesGVR, l, l.Namespace)
	} else {
		err = tracker.Update(leasesGVR, l, l.Namespace)
	}
	if err != nil {
		return true, nil, err
	}
	if a.written != nil {
		a.written(verb, l.DeepCopy())
	}
	if a.lose != nil {
		if err := a.lose(verb, l.DeepCopy()); err != nil {
			return true, nil, err
		}
	}
	return true, l.DeepCopy(), nil
}

// setFail sets a.fail under its lock.
func (a *apiServer) setFail(fail func(verb string, l *coordv1.Lease) error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail = fail
}

// setLose sets a.lose under its lock.
func (a *apiServer) setLose(lose func(verb string, l *coordv1.Lease) error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lose = lose
}

// setDelay sets a.delay under its lock.
func (a *apiServer) setDelay(delay func(verb string, l *coordv1.Lease)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.delay = delay
}
