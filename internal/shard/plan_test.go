package shard

import (
	"slices"
	"strings"
	"testing"
)

// makeView builds a view of replica me from a picture of the shards, one character each:
// '.' free, ':' free for a Lease duration already (stale), '~' soon (its holder dead or
// handing it off), a letter: the live replica renewing it (me's are the ones it serves).
// Candidates are shards me warms; offset is 0.
func makeView(me string, live string, shards string, candidates []int, releasing bool) view {
	n := len(shards)
	v := view{me: me, live: strings.Split(live, ""), holder: make([]string, n), free: make([]bool, n),
		stale: make([]bool, n), soon: make([]bool, n), busy: make([]bool, n), releasing: releasing, candidates: candidates}
	for i, c := range shards {
		switch c {
		case '.':
			v.free[i] = true
		case ':':
			v.free[i], v.stale[i] = true, true
		case '~':
			v.soon[i] = true
		default:
			v.holder[i] = string(c)
			if string(c) == me {
				v.serving = append(v.serving, i)
				v.busy[i] = true
			}
		}
	}
	for _, c := range candidates {
		v.busy[c] = true
	}
	return v
}

// TestPlan: one row per rule of plan.
func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name       string
		me, live   string
		shards     string
		candidates []int
		releasing  bool
		want       decision
	}{
		{name: "alone: one free shard started and taken per step",
			me: "a", live: "a", shards: "......",
			want: decision{shed: -1, start: []int{0}, take: 0}},
		{name: "over the fair share: gives its highest up",
			me: "a", live: "ab", shards: "aaaaaa",
			want: decision{shed: 5, take: -1}},
		{name: "one give-up at a time",
			me: "a", live: "ab", shards: "aaaaab", releasing: true,
			want: decision{shed: -1, take: -1}},
		{name: "giving up drops the candidates",
			me: "a", live: "ab", shards: "aaaa~b", candidates: []int{4},
			want: decision{shed: 3, drop: []int{4}, take: -1}},
		{name: "at the fair share: no candidate",
			me: "a", live: "ab", shards: "aaabbb", candidates: []int{5},
			want: decision{shed: -1, drop: []int{5}, take: -1}},
		{name: "newcomer warms what the loaded replicas give up, their highest",
			me: "c", live: "abc", shards: "aaabbb",
			want: decision{shed: -1, start: []int{2, 5}, take: -1}},
		{name: "a candidate its holder keeps is dropped",
			me: "c", live: "abc", shards: "aabbb.", candidates: []int{1},
			want: decision{shed: -1, drop: []int{1}, start: []int{5, 4}, take: 5}},
		{name: "shards of no live replica warmed ahead, one free shard taken",
			me: "a", live: "a", shards: "~~~...",
			want: decision{shed: -1, start: []int{3, 0, 1, 2}, take: 3}},
		{name: "a soon candidate makes way for a free shard",
			me: "a", live: "abc", shards: "~~bbc.", candidates: []int{0, 1},
			want: decision{shed: -1, drop: []int{1}, start: []int{5}, take: 5}},
		{name: "a warmed candidate taken once free",
			me: "a", live: "ab", shards: "aa.bbb", candidates: []int{2},
			want: decision{shed: -1, take: 2}},
		{name: "7 over 3: the first above the floor gives one to the one below",
			me: "a", live: "abc", shards: "aaabbbc",
			want: decision{shed: 2, take: -1}},
		{name: "7 over 3: the second above the floor keeps its shards",
			me: "b", live: "abc", shards: "aaabbbc",
			want: decision{shed: -1, take: -1}},
		{name: "7 over 3: the one below the floor warms the shard meant for it",
			me: "c", live: "abc", shards: "aaabbbc",
			want: decision{shed: -1, start: []int{2}, take: -1}},
		{name: "7 over 3: no give-up while a shard is free",
			me: "a", live: "abc", shards: "aaabb.c",
			want: decision{shed: -1, take: -1}},
		{name: "deferring: at the floor, a shard freed for the one below is left to it",
			me: "a", live: "abc", shards: "aa.bbbc",
			want: decision{shed: -1, take: -1}},
		{name: "deferring: unless it stayed free a Lease duration more",
			me: "a", live: "abc", shards: "aa:bbbc",
			want: decision{shed: -1, start: []int{2}, take: 2}},
		{name: "below the floor: takes without deferring",
			me: "c", live: "abc", shards: "aa.bbbc",
			want: decision{shed: -1, start: []int{2}, take: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := plan(makeView(tc.me, tc.live, tc.shards, tc.candidates, tc.releasing))
			if got.shed != tc.want.shed || got.take != tc.want.take || !slices.Equal(got.drop, tc.want.drop) || !slices.Equal(got.start, tc.want.start) {
				t.Errorf("plan = %+v, want %+v", got, tc.want)
			}
		})
	}
}
