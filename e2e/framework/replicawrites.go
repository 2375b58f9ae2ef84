package framework

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReplicaWrite is one request of a fleet replica to a member, from the member API server's audit
// log: cascade's user agent in fleet mode names both ("cascade/MEMBER (replica ID)").
type ReplicaWrite struct {
	At              time.Time
	Member, Replica string
	What            string
}

var replicaAgent = regexp.MustCompile(`^cascade/([^ ]+) \(replica ([^)]+)\)`)

// ReplicaWrites reads the requests of cascade's fleet replicas from an audit log (one JSON event
// per line; their ResponseComplete stage). Which requests are there is the audit policy's
// choice: the tests log writes.
func ReplicaWrites(path string) ([]ReplicaWrite, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []ReplicaWrite
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct {
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			ObjectRef *struct {
				Resource, Namespace, Name string
			} `json:"objectRef"`
			Stage                    string           `json:"stage"`
			RequestReceivedTimestamp metav1.MicroTime `json:"requestReceivedTimestamp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		m := replicaAgent.FindStringSubmatch(ev.UserAgent)
		if m == nil || ev.Stage != "ResponseComplete" {
			continue
		}
		what := ev.Verb
		if ev.ObjectRef != nil {
			what += " " + ev.ObjectRef.Resource + " " + ev.ObjectRef.Namespace + "/" + ev.ObjectRef.Name
		}
		out = append(out, ReplicaWrite{At: ev.RequestReceivedTimestamp.Time, Member: m[1], Replica: m[2], What: what})
	}
	return out, sc.Err()
}

// Handoff is a member written by one replica, then by another.
type Handoff struct {
	Member     string
	Prev, Next ReplicaWrite
}

// Gap is the time between the two writes.
func (h Handoff) Gap() time.Duration { return h.Next.At.Sub(h.Prev.At) }

func (h Handoff) String() string {
	return fmt.Sprintf("member %s: written by %s at %s (%s), then by %s at %s (%s): %v apart",
		h.Member, h.Prev.Replica, h.Prev.At.Format("15:04:05.000"), h.Prev.What, h.Next.Replica, h.Next.At.Format("15:04:05.000"), h.Next.What, h.Gap())
}

// Handoffs returns, per member, every change of writer in time order.
func Handoffs(writes []ReplicaWrite) []Handoff {
	byMember := map[string][]ReplicaWrite{}
	for _, w := range writes {
		byMember[w.Member] = append(byMember[w.Member], w)
	}
	var out []Handoff
	for member, ws := range byMember {
		sort.Slice(ws, func(i, j int) bool { return ws[i].At.Before(ws[j].At) })
		for i := 1; i < len(ws); i++ {
			if ws[i-1].Replica != ws[i].Replica {
				out = append(out, Handoff{Member: member, Prev: ws[i-1], Next: ws[i]})
			}
		}
	}
	return out
}
