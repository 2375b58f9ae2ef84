package gc

import (
	"fmt"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func absentKey(i int) AbsentKey {
	return AbsentKey{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns1", Name: fmt.Sprintf("cm-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}
}

func TestAbsentCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := NewAbsentCache(2)
	c.Add(absentKey(1))
	c.Add(absentKey(2))
	if !c.Has(absentKey(1)) { // 1 becomes the most recently used
		t.Fatal("key 1 missing")
	}
	c.Add(absentKey(3)) // evicts 2
	if c.Has(absentKey(2)) {
		t.Error("key 2 should have been evicted")
	}
	if !c.Has(absentKey(1)) || !c.Has(absentKey(3)) {
		t.Error("keys 1 and 3 should be cached")
	}
	if got := c.Len(); got != 2 {
		t.Errorf("Len() = %d, want 2", got)
	}
}

func TestAbsentCacheKeyIsAllCoordinates(t *testing.T) {
	c := NewAbsentCache(10)
	k := absentKey(1)
	c.Add(k)
	c.Add(k)
	if got := c.Len(); got != 1 {
		t.Errorf("adding a key twice: Len() = %d, want 1", got)
	}
	for field, change := range map[string]func(*AbsentKey){
		"apiVersion":    func(v *AbsentKey) { v.APIVersion = "example.com/v1" },
		"kind":          func(v *AbsentKey) { v.Kind = "Secret" },
		"namespace":     func(v *AbsentKey) { v.Namespace = "ns2" },
		"cluster scope": func(v *AbsentKey) { v.Namespace = "" },
		"name":          func(v *AbsentKey) { v.Name = "other" },
		"uid":           func(v *AbsentKey) { v.UID = "other" },
	} {
		v := k
		change(&v)
		if c.Has(v) {
			t.Errorf("a different %s must not hit the cache", field)
		}
	}
}

func TestNewAbsentCacheDefaultSize(t *testing.T) {
	for _, size := range []int{0, -1} {
		c := NewAbsentCache(size)
		for i := range DefaultAbsentCacheSize + 1 {
			c.Add(absentKey(i))
		}
		if got := c.Len(); got != DefaultAbsentCacheSize {
			t.Errorf("NewAbsentCache(%d): Len() = %d, want %d", size, got, DefaultAbsentCacheSize)
		}
		if c.Has(absentKey(0)) {
			t.Errorf("NewAbsentCache(%d): the oldest key should have been evicted", size)
		}
	}
}

// TestAbsentCacheConcurrent is meant for -race.
func TestAbsentCacheConcurrent(t *testing.T) {
	c := NewAbsentCache(64)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := absentKey(w*1000 + i%100)
				c.Add(k)
				c.Has(k)
				c.Len()
			}
		})
	}
	wg.Wait()
	if got := c.Len(); got != 64 {
		t.Errorf("Len() = %d, want 64", got)
	}
}
