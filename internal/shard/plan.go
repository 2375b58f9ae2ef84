package shard

import "slices"

// view is what one replica knows when it balances: its own shards and what the Leases say.
// plan decides from it alone.
type view struct {
	me string
	// live are the identities of the live replicas (this one included), sorted.
	live []string
	// holder, per shard: the live replica renewing its Lease; "" when the shard is free or soon.
	holder []string
	// free, per shard: it may be taken now (observation.free).
	free []bool
	// stale, per shard: free for a Lease duration already (see deferring).
	stale []bool
	// soon, per shard: held, but by a replica that is not live or that handed it off: free
	// within a Lease duration without anyone giving it up.
	soon []bool
	// serving are the shards this replica holds and writes in, ascending.
	serving []int
	// busy, per shard: this replica runs a Start for it (warming, serving, or stopping).
	busy []bool
	// releasing: this replica is giving a shard up (one at a time).
	releasing bool
	// candidates are the shards this replica warms to take, ascending.
	candidates []int
	// offset is where this replica starts looking for a free shard, so that replicas
	// starting together try different ones first.
	offset int
	// deferring: this replica is at the floor or above while another is below: it leaves
	// the shards to that one (plan sets it).
	deferring bool
	// mixed: a shard Lease is held under another shard count: nothing is taken.
	mixed bool
}

// decision is what one balancing step does: at most one shard given up, at most one taken.
type decision struct {
	shed  int   // the shard to give up (-1: none)
	drop  []int // candidates to stop warming
	start []int // new candidates to warm
	take  int   // a candidate to take now, being free (-1: none)
}

// plan balances one replica. It gives a shard up while it holds more than its fair share
// (ceil(shards / live replicas)); while it holds less, it warms as many candidates as it
// lacks shards (free ones first, then ones held by no live replica, then the ones other
// replicas are expected to give up) and takes one that is free. It takes nothing while a
// shard Lease is held under another shard count (mixed), and defers to a replica below the
// floor (deferring).
func plan(v view) decision {
	d := decision{shed: -1, take: -1}
	load := v.loads()
	held := len(v.serving)
	q, ceil := v.shares()
	if !v.releasing && held > 0 && v.sheds(v.me, load) {
		d.shed = v.serving[held-1] // the highest: what the others expect (promising)
		d.drop = v.candidates
		return d
	}
	if v.mixed {
		d.drop = v.candidates
		return d
	}
	if held >= q && v.below(load, q) {
		// Another replica is below the floor: the shards freed (given up for it, or held by
		// a dead replica) are its. This one takes only a shard left free for a Lease
		// duration more (the other cannot take it), so that none stays unheld.
		v.deferring, v.free, v.soon = true, v.stale, make([]bool, len(v.holder))
	}
	want := max(ceil-held, 0)
	var kept []int
	for _, c := range v.candidates {
		if len(kept) < want && v.promising(c, load, held, q, ceil) {
			kept = append(kept, c)
		} else {
			d.drop = append(d.drop, c)
		}
	}
	chosen := slices.Clone(v.busy)
	// Shards not free yet are warmed ahead (that is where warming shortens the gap); a free
	// one only as it is taken, one per step.
	freeKept := slices.ContainsFunc(kept, func(c int) bool { return v.free[c] })
	if !freeKept && want > 0 && len(kept) >= want && v.anyFree(chosen) {
		d.drop = append(d.drop, kept[len(kept)-1]) // a free shard goes first
		kept = kept[:len(kept)-1]
	}
	for len(kept)+len(d.start) < want {
		c := v.choose(chosen, !freeKept, load, held, q, ceil)
		if c < 0 {
			break
		}
		chosen[c] = true
		freeKept = freeKept || v.free[c]
		d.start = append(d.start, c)
	}
	for _, c := range append(kept, d.start...) {
		if v.free[c] {
			d.take = c
			break
		}
	}
	return d
}

// shares are the floor and the ceiling (the fair share) of shards per live replica.
func (v view) shares() (q, ceil int) {
	n, r := len(v.holder), max(len(v.live), 1)
	return n / r, (n + r - 1) / r
}

// order is the shards from this replica's offset on.
func (v view) order() []int {
	n := len(v.holder)
	out := make([]int, n)
	for k := range n {
		out[k] = (v.offset + k) % n
	}
	return out
}

// loads counts the shards each live replica holds: this one's own, the others' from their
// Leases.
func (v view) loads() map[string]int {
	load := make(map[string]int, len(v.live))
	for _, h := range v.holder {
		if h != "" && h != v.me {
			load[h]++
		}
	}
	load[v.me] = len(v.serving)
	return load
}

// sheds reports whether replica id is expected to give a shard up: it holds more than the
// fair share; or every shard is held, one replica holds less than the floor, and id is the
// first (by identity) of those holding more than the floor (so that exactly one gives up and
// 7 shards over 3 replicas end 3/2/2, not 3/3/1).
func (v view) sheds(id string, load map[string]int) bool {
	return v.excess(id, load) > 0
}

// below reports whether another live replica holds less than the floor q.
func (v view) below(load map[string]int, q int) bool {
	for _, r := range v.live {
		if r != v.me && load[r] < q {
			return true
		}
	}
	return false
}

// excess is how many shards replica id is expected to give up, one at a time.
func (v view) excess(id string, load map[string]int) int {
	q, ceil := v.shares()
	if load[id] > ceil {
		return load[id] - ceil
	}
	if load[id] <= q || slices.Contains(v.free, true) || slices.Contains(v.soon, true) {
		return 0
	}
	below := false
	for _, r := range v.live {
		below = below || load[r] < q
	}
	if !below {
		return 0
	}
	for _, r := range v.live {
		if load[r] > q {
			if r == id {
				return 1
			}
			return 0
		}
	}
	return 0
}

// yielded is how many shards live replica h is expected to give this replica: its excess,
// when it holds more than the fair share or this replica less than the floor (a replica at
// the floor does not take the one shard meant for a replica below it).
func (v view) yielded(h string, load map[string]int, held, q, ceil int) int {
	if h == v.me || v.deferring || (load[h] <= ceil && held >= q) {
		return 0
	}
	return v.excess(h, load)
}

// promising reports whether candidate c is worth warming still: free now or soon, or among
// the shards its holder is expected to give up (its highest).
func (v view) promising(c int, load map[string]int, held, q, ceil int) bool {
	if v.free[c] || v.soon[c] {
		return true
	}
	h := v.holder[c]
	if h == "" {
		return false
	}
	n := v.yielded(h, load, held, q, ceil)
	for i := len(v.holder) - 1; i >= 0 && n > 0; i-- {
		if v.holder[i] == h {
			if i == c {
				return true
			}
			n--
		}
	}
	return false
}

// anyFree reports whether a shard not in chosen is free.
func (v view) anyFree(chosen []bool) bool {
	for i, f := range v.free {
		if f && !chosen[i] {
			return true
		}
	}
	return false
}

// choose is the next shard to warm, not in chosen: a free one (if free); else one held by
// no live replica (or handed off); else one of the shards the most loaded replica is
// expected to give up (its highest first). -1: none.
func (v view) choose(chosen []bool, free bool, load map[string]int, held, q, ceil int) int {
	for _, i := range v.order() {
		if free && v.free[i] && !chosen[i] {
			return i
		}
	}
	for _, i := range v.order() {
		if v.soon[i] && !v.free[i] && !chosen[i] {
			return i
		}
	}
	hs := slices.Clone(v.live)
	slices.SortStableFunc(hs, func(a, b string) int { return load[b] - load[a] })
	for _, h := range hs {
		n := v.yielded(h, load, held, q, ceil)
		for i := len(v.holder) - 1; i >= 0 && n > 0; i-- {
			if v.holder[i] != h {
				continue
			}
			if !chosen[i] {
				return i
			}
			n--
		}
	}
	return -1
}
