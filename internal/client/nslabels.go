package client

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// NamespaceLabelsTTL is how long the labels of a namespace, read for a policy rule's namespace
// selector, are reused; maxCachedNamespaces bounds the cache (it is emptied when full).
const (
	NamespaceLabelsTTL  = 30 * time.Second
	maxCachedNamespaces = 4096
)

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// NamespaceLabels caches the labels of namespaces for the policy's namespace selectors: one
// GET per namespace per namespaceLabelsTTL, at most maxCachedNamespaces entries. It is safe for
// concurrent use.
type NamespaceLabels struct {
	clock   clock.PassiveClock
	mu      sync.Mutex
	entries map[string]namespaceEntry // guarded by mu
}

type namespaceEntry struct {
	labels  labels.Set
	fetched time.Time
}

// NewNamespaceLabels returns an empty cache; clk times its entries.
func NewNamespaceLabels(clk clock.PassiveClock) *NamespaceLabels {
	return &NamespaceLabels{clock: clk, entries: map[string]namespaceEntry{}}
}

// Get returns the labels of namespace ns; a namespace that does not exist has none.
func (l *NamespaceLabels) Get(ctx context.Context, c Interface, ns string) (labels.Set, error) {
	now := l.clock.Now()
	l.mu.Lock()
	e, ok := l.entries[ns]
	l.mu.Unlock()
	if ok && now.Sub(e.fetched) < NamespaceLabelsTTL {
		return e.labels, nil
	}
	obj, err := c.Get(ctx, namespacesGVR, "", ns)
	var set labels.Set
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, err
	default:
		set = labels.Set(obj.Labels)
	}
	l.mu.Lock()
	if len(l.entries) >= maxCachedNamespaces {
		clear(l.entries)
	}
	l.entries[ns] = namespaceEntry{labels: set, fetched: now}
	l.mu.Unlock()
	return set, nil
}
