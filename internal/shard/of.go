package shard

import "hash/fnv"

// Of maps a member to its shard: FNV-1a (32 bits) of its name, modulo shards. Every replica,
// every version, computes the same: changing it moves members between shards (and so between
// replicas) at an upgrade. Shards below 1 map everything to shard 0.
func Of(member string, shards int) int {
	if shards < 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(member)) // a hash.Hash never fails to write
	return int(h.Sum32() % uint32(shards))
}
