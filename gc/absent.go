package gc

import (
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultAbsentCacheSize is the number of absent owners remembered by
// default. The in-tree collector keeps 500; a larger cache saves a GET per
// dependent when big trees are collected, at about 200 bytes per entry.
const DefaultAbsentCacheSize = 10000

// AbsentKey identifies an owner by the coordinates a reference names it with.
// Namespace is empty for a cluster-scoped owner and is the dependent's
// namespace for a namespaced one, so a verdict for one namespace never
// answers for another.
type AbsentKey struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID
}

// AbsentCache remembers owners verified absent (observed deleted, or a 404
// or UID mismatch at their coordinates), so references to them are known
// dangling without another GET. UIDs are never reused, so an entry never
// becomes wrong; eviction only costs a GET. It is safe for concurrent use.
type AbsentCache struct {
	cache *lru.Cache[AbsentKey, struct{}]
}

// NewAbsentCache returns a cache holding at most size owners, evicting the
// least recently used. A size of zero or less means DefaultAbsentCacheSize.
func NewAbsentCache(size int) *AbsentCache {
	if size <= 0 {
		size = DefaultAbsentCacheSize
	}
	c, err := lru.New[AbsentKey, struct{}](size)
	if err != nil {
		// lru.New fails only for a size below one, excluded above.
		panic(fmt.Sprintf("absent owner cache of size %d: %v", size, err))
	}
	return &AbsentCache{cache: c}
}

// Add records that the owner at k is absent.
func (c *AbsentCache) Add(k AbsentKey) {
	c.cache.Add(k, struct{}{})
}

// Has reports whether the owner at k is known to be absent. A hit marks the
// entry recently used, so owners with many dependents stay cached.
func (c *AbsentCache) Has(k AbsentKey) bool {
	_, ok := c.cache.Get(k)
	return ok
}

// Len returns the number of owners in the cache.
func (c *AbsentCache) Len() int {
	return c.cache.Len()
}
