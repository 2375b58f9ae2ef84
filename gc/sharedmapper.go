package gc

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"weak"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"
)

// SharedMappers holds REST mappers by the discovery document they were built from, so that the
// members of a fleet whose API servers serve the same resources (one Kubernetes version, the
// same CRDs) hold one mapper between them instead of one each: the mapper of the built-in APIs
// is about 160 KiB, the largest part of an idle member's heap after its graph (docs/fleet.md).
// A mapper is kept while some member uses it (weak references: the last member to drop it
// lets it go).
type SharedMappers struct {
	mu sync.Mutex
	m  map[[32]byte]weak.Pointer[sharedMapping] // guarded by mu
}

// sharedMapping is one mapper, shared by the members whose discovery document it was built from.
type sharedMapping struct{ mapper meta.RESTMapper }

// NewSharedMappers returns an empty set.
func NewSharedMappers() *SharedMappers {
	return &SharedMappers{m: map[[32]byte]weak.Pointer[sharedMapping]{}}
}

// Len is the number of mappers held now (for tests and metrics).
func (s *SharedMappers) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, wp := range s.m {
		if wp.Value() != nil {
			n++
		}
	}
	return n
}

// get returns the mapper of groups: the one already held for an identical document, or a new
// one.
func (s *SharedMappers) get(groups []*restmapper.APIGroupResources) (*sharedMapping, error) {
	doc, err := json.Marshal(groups) // maps are written in key order: equal documents, equal bytes
	if err != nil {
		return nil, fmt.Errorf("discovery document: %w", err)
	}
	key := sha256.Sum256(doc)
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.m[key].Value(); v != nil {
		return v, nil
	}
	for k, wp := range s.m { // the mappers no member uses any more
		if wp.Value() == nil {
			delete(s.m, k)
		}
	}
	v := &sharedMapping{mapper: restmapper.NewDiscoveryRESTMapper(groups)}
	s.m[key] = weak.Make(v)
	return v, nil
}

// Mapper returns a member's REST mapper over its discovery client cl, as client-go's
// DeferredDiscoveryRESTMapper over a memory-cached client does (built at the first question
// from one fetch of the discovery document, rebuilt after Reset), but holding only the shared
// mapper of its document: no member keeps a copy of the document itself (a cached discovery
// client's is about 75 KiB per member with the built-in APIs).
func (s *SharedMappers) Mapper(cl discovery.DiscoveryInterface) meta.ResettableRESTMapper {
	return &deferredShared{shared: s, cl: cl}
}

type deferredShared struct {
	shared *SharedMappers
	cl     discovery.DiscoveryInterface

	mu  sync.Mutex
	cur *sharedMapping // guarded by mu; nil until asked, and after Reset
}

var _ meta.ResettableRESTMapper = (*deferredShared)(nil)

func (d *deferredShared) delegate() (meta.RESTMapper, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur == nil {
		groups, err := restmapper.GetAPIGroupResources(d.cl)
		if err != nil {
			return nil, err
		}
		if d.cur, err = d.shared.get(groups); err != nil {
			return nil, err
		}
	}
	return d.cur.mapper, nil
}

// Reset drops the mapper: the next question discovers again.
func (d *deferredShared) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cur = nil
}

// ask answers with the mapper. A mapper is built from a document fetched for it, so it is as
// fresh as a memory-cached client's after its fetch, and a failed question is not asked again
// (the discovery loop resets the mapper when discovery changes).
func ask[T any](d *deferredShared, q func(meta.RESTMapper) (T, error)) (T, error) {
	del, err := d.delegate()
	if err != nil {
		var zero T
		return zero, err
	}
	return q(del)
}

func (d *deferredShared) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return ask(d, func(m meta.RESTMapper) (schema.GroupVersionKind, error) { return m.KindFor(resource) })
}

func (d *deferredShared) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return ask(d, func(m meta.RESTMapper) ([]schema.GroupVersionKind, error) { return m.KindsFor(resource) })
}

func (d *deferredShared) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return ask(d, func(m meta.RESTMapper) (schema.GroupVersionResource, error) { return m.ResourceFor(input) })
}

func (d *deferredShared) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return ask(d, func(m meta.RESTMapper) ([]schema.GroupVersionResource, error) { return m.ResourcesFor(input) })
}

func (d *deferredShared) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return ask(d, func(m meta.RESTMapper) (*meta.RESTMapping, error) { return m.RESTMapping(gk, versions...) })
}

func (d *deferredShared) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return ask(d, func(m meta.RESTMapper) ([]*meta.RESTMapping, error) { return m.RESTMappings(gk, versions...) })
}

func (d *deferredShared) ResourceSingularizer(resource string) (string, error) {
	return ask(d, func(m meta.RESTMapper) (string, error) { return m.ResourceSingularizer(resource) })
}
