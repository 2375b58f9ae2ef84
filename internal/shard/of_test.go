package shard

import (
	"fmt"
	"testing"
)

// TestOfGolden: the hash of a member never changes (FNV-1a 32, values computed outside Go):
// a change would move members between replicas at an upgrade.
func TestOfGolden(t *testing.T) {
	for _, tc := range []struct {
		member string
		shards int
		want   int
	}{
		{"", 6, 1},             // 0x811c9dc5
		{"a", 6, 4},            // 0xe40c292c
		{"tenant-a", 6, 3},     // 0x93332d7b
		{"tenant-b", 6, 2},     // 0x94332f0e
		{"prod-eu-1", 6, 1},    // 0x100abd53
		{"cluster-0042", 6, 2}, // 0x772068aa
		{"tenant-a", 1000, 731},
		{"cluster-0042", 1000, 650},
		{"tenant-a", 1, 0},
		{"tenant-a", 0, 0}, // no shards: everything in shard 0
	} {
		if got := Of(tc.member, tc.shards); got != tc.want {
			t.Errorf("Of(%q, %d) = %d, want %d", tc.member, tc.shards, got, tc.want)
		}
	}
}

// TestOfSpread: 1,000 names over 6 shards, each shard within 20% of the mean (167).
func TestOfSpread(t *testing.T) {
	for _, format := range []string{"member-%d", "tenant-%04d"} {
		counts := make([]int, 6)
		for i := range 1000 {
			counts[Of(fmt.Sprintf(format, i), 6)]++
		}
		for s, n := range counts {
			if n < 133 || n > 200 {
				t.Errorf("%s: shard %d has %d of 1000 names (counts %v)", format, s, n, counts)
			}
		}
	}
}
