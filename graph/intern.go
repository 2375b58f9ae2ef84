package graph

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// uidKey is a UID in compact form: the 16 bytes of a canonical RFC 4122
// UUID. Only the canonical lower-case 8-4-4-4-12 spelling is compacted, so
// that formatting the key gives back exactly the string the API server sent;
// every other UID lives in a side table (see Graph.sideUID).
type uidKey [16]byte

// hexVal maps a lower-case hex digit to its value and everything else to
// 0xff.
var hexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range hexDigits {
		t[c] = byte(i)
	}
	return t
}()

// uuidHex are the offsets of the 16 hex pairs in an 8-4-4-4-12 UUID.
var uuidHex = [16]uint8{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// parseUID compacts a canonical UUID; ok is false for anything else.
func parseUID(s types.UID) (k uidKey, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return k, false
	}
	var bad byte
	for j, i := range uuidHex {
		hi, lo := hexVal[s[i]], hexVal[s[i+1]]
		bad |= hi | lo
		k[j] = hi<<4 | lo
	}
	return k, bad&0xf0 == 0
}

const hexDigits = "0123456789abcdef"

func (k uidKey) uid() types.UID {
	var b [36]byte
	j := 0
	for i, c := range k {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = hexDigits[c>>4], hexDigits[c&0xf]
		j += 2
	}
	return types.UID(b[:])
}

// parseRV returns the value of a canonical decimal resourceVersion (no sign,
// no leading zero, fits in a uint64); ok is false for anything else, which
// the graph keeps verbatim in a side table.
func parseRV(s string) (uint64, bool) {
	if s == "" || len(s) > 20 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// gvkKey is an (apiVersion, kind) pair as written in an object or a
// reference. The pair is interned rather than split into group and version:
// the graph never needs the parts, only equality.
type gvkKey struct{ apiVersion, kind string }

type gvkEntry struct {
	gvkKey
	observed int // observed nodes of this apiVersion and kind (Stats.PerResource)
}

// interner maps repeated strings to small integers. Id 0 is the empty
// value in both tables. Entries nothing uses any more are freed by
// Graph.Compact (namespaces come and go by the thousand in some clusters);
// their ids are reused, lowest first.
type interner struct {
	gvks    []gvkEntry
	gvkIdx  map[gvkKey]uint32
	nss     []string
	nsIdx   map[string]uint32
	freeGVK []uint32 // freed ids below len(gvks), highest first (reused from the end)
	freeNS  []uint32 // freed ids below len(nss), highest first
}

func newInterner() interner {
	return interner{
		gvks:   []gvkEntry{{}},
		gvkIdx: map[gvkKey]uint32{{}: 0},
		nss:    []string{""},
		nsIdx:  map[string]uint32{"": 0},
	}
}

// maxGVK bounds the interned (apiVersion, kind) ids so they fit in an
// edge's bit field.
const maxGVK = eGVKMask

func (in *interner) gvk(apiVersion, kind string) uint32 {
	if id, ok := in.gvkIdx[gvkKey{apiVersion, kind}]; ok {
		return id
	}
	k := gvkKey{strings.Clone(apiVersion), strings.Clone(kind)}
	if n := len(in.freeGVK); n > 0 {
		id := in.freeGVK[n-1]
		in.freeGVK = in.freeGVK[:n-1]
		in.gvks[id] = gvkEntry{gvkKey: k}
		in.gvkIdx[k] = id
		return id
	}
	id := uint32(len(in.gvks))
	if id > maxGVK {
		panic("graph: too many distinct apiVersion/kind pairs")
	}
	in.gvks = append(in.gvks, gvkEntry{gvkKey: k})
	in.gvkIdx[k] = id
	return id
}

func (in *interner) lookupGVK(apiVersion, kind string) (uint32, bool) {
	id, ok := in.gvkIdx[gvkKey{apiVersion, kind}]
	return id, ok
}

func (in *interner) ns(s string) uint32 {
	if id, ok := in.nsIdx[s]; ok {
		return id
	}
	s = strings.Clone(s)
	if n := len(in.freeNS); n > 0 {
		id := in.freeNS[n-1]
		in.freeNS = in.freeNS[:n-1]
		in.nss[id] = s
		in.nsIdx[s] = id
		return id
	}
	id := uint32(len(in.nss))
	in.nss = append(in.nss, s)
	in.nsIdx[s] = id
	return id
}

func (in *interner) lookupNS(s string) (uint32, bool) {
	id, ok := in.nsIdx[s]
	return id, ok
}
