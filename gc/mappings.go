package gc

import (
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// mappingCache remembers the REST mappings the mapper found, by kind and version, until the
// mapper is reset. A dependent's decision resolves the kind of each of its references to gone
// or waiting owners (decide.go, ownerKind), so every collected dependent's owner kinds are
// looked up: through client-go's DeferredDiscoveryRESTMapper that is a lock, a
// walk of every discovered kind and a few allocations, about a tenth of cascade's CPU time while
// it collected unthrottled (a CPU profile of BenchmarkCompareGC's background scenario).
//
// The answers are the mapper's own: a mapping is found in the cache only while the mapper would
// still give it. The mapper's positive answers change only when it is reset, which discovery
// does every round (Controller.syncResources clears the cache at the same moment); a mapping
// error is never cached, and it clears the cache (client-go's deferred mapper may refresh
// itself after a miss), so a kind without REST mapping is looked up, and refused, every time.
type mappingCache struct {
	mu sync.RWMutex
	m  map[mappingKey]*meta.RESTMapping // guarded by mu
	// gen counts clears (guarded by mu): an answer the mapper gave before a clear is not kept
	// after it.
	gen uint64
}

type mappingKey struct {
	gk      schema.GroupKind
	version string
}

func newMappingCache() *mappingCache {
	return &mappingCache{m: map[mappingKey]*meta.RESTMapping{}}
}

// get returns the mapping of gk at version, asking mapper when it is not cached. Callers must
// not modify the mapping (it is shared).
func (c *mappingCache) get(mapper meta.RESTMapper, gk schema.GroupKind, version string) (*meta.RESTMapping, error) {
	k := mappingKey{gk: gk, version: version}
	c.mu.RLock()
	m, ok := c.m[k]
	gen := c.gen
	c.mu.RUnlock()
	if ok {
		return m, nil
	}
	m, err := mapper.RESTMapping(gk, version)
	if err != nil {
		c.clear()
		return nil, err
	}
	c.mu.Lock()
	if c.gen == gen {
		c.m[k] = m
	}
	c.mu.Unlock()
	return m, nil
}

// clear forgets every mapping: the mapper was reset, or may have refreshed itself.
func (c *mappingCache) clear() {
	c.mu.Lock()
	clear(c.m)
	c.gen++
	c.mu.Unlock()
}

// restMapping is the REST mapping of gk at version (mappingCache's answer, or the mapper's).
func (c *Controller) restMapping(gk schema.GroupKind, version string) (*meta.RESTMapping, error) {
	if c.opts.Mapper == nil {
		return nil, errors.New("no REST mapper")
	}
	m, err := c.mappings.get(c.opts.Mapper, gk, version)
	if err != nil {
		return nil, fmt.Errorf("REST mapping of %s/%s: %w", gk, version, err)
	}
	return m, nil
}
