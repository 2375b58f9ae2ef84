package gc

import (
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// memberResources are a member's resources: ConfigMaps, and Widgets of example.com/v1 when
// widgets is set.
func memberResources(widgets bool) []*metav1.APIResourceList {
	lists := []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"list", "watch", "delete"}},
	}}}
	if widgets {
		lists = append(lists, &metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", SingularName: "widget", Namespaced: true, Kind: "Widget", Verbs: []string{"list", "watch", "delete"}},
		}})
	}
	return lists
}

// memberDiscovery is a member's discovery client, and its fake server.
func memberDiscovery(widgets bool) (discovery.DiscoveryInterface, *clienttesting.Fake) {
	f := &clienttesting.Fake{Resources: memberResources(widgets)}
	return &fakediscovery.FakeDiscovery{Fake: f}, f
}

// fetches counts the discovery document's fetches a fake server answered (each fetch asks for
// the resources of every group version).
func fetches(f *clienttesting.Fake) int {
	n := 0
	for _, a := range f.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "resource" {
			n++
		}
	}
	return n
}

// Members with the same discovery document share one mapper; another document has its own; a
// mapper no member holds any more is let go; a reset member asks again and finds the one of its
// new document (a CRD added).
func TestSharedMappers(t *testing.T) {
	s := NewSharedMappers()
	aDisco, _ := memberDiscovery(false)
	bDisco, _ := memberDiscovery(false)
	cDisco, cServer := memberDiscovery(true)
	a, b, c := s.Mapper(aDisco), s.Mapper(bDisco), s.Mapper(cDisco)
	ma, err := a.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1"); err != nil {
		t.Fatal(err)
	}
	if ma.Resource.Resource != "configmaps" {
		t.Fatalf("mapping %+v", ma)
	}
	if a.(*deferredShared).cur != b.(*deferredShared).cur {
		t.Fatal("two members with the same discovery document hold two mappers")
	}
	if _, err := c.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Widget"}, "v1"); err != nil {
		t.Fatal(err)
	}
	if c.(*deferredShared).cur == a.(*deferredShared).cur || s.Len() != 2 {
		t.Fatalf("a member with another document shares its mapper, or %d mappers held, want 2", s.Len())
	}
	if _, err := a.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Widget"}, "v1"); err == nil {
		t.Fatal("a member whose API server serves no widgets maps them")
	}

	// c's CRD goes (its document is the others' now): reset, c holds their mapper; the widgets'
	// mapper, held by nobody, is let go. c fetched its document once for all its questions.
	if _, err := c.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Gadget"}, "v1"); err == nil {
		t.Fatal("an unknown kind mapped")
	}
	if n := fetches(cServer); n != 1 {
		t.Errorf("c fetched its discovery document %d times for three questions (one of an unknown kind), want 1", n)
	}
	cServer.Resources = memberResources(false)
	c.Reset()
	if _, err := c.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1"); err != nil {
		t.Fatal(err)
	}
	if c.(*deferredShared).cur != a.(*deferredShared).cur {
		t.Fatal("after a reset to the same document as the others, c holds a mapper of its own")
	}
	if n := fetches(cServer); n != 1+1 {
		t.Errorf("c fetched its discovery document %d times in all, want 2 (once more after the reset)", n)
	}
	for range 5 {
		runtime.GC()
	}
	if n := s.Len(); n != 1 {
		t.Fatalf("%d mappers held, want 1 (the widgets' mapper is held by no member)", n)
	}
	runtime.KeepAlive([]any{a, b, c}) // the members live on
}
