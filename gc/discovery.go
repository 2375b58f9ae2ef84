package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/cascade-gc/cascade/policy"
)

// Resource is one deletable resource cascade watches: its preferred version, its kind and scope.
type Resource struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
}

// ResourceSet maps each watched resource to what discovery said about it.
type ResourceSet map[schema.GroupVersionResource]Resource

// DiscoveryResult is one round of discovery.
type DiscoveryResult struct {
	Resources ResourceSet
	// FailedGroups are API groups whose discovery failed (a broken aggregated API, say). Their
	// resources are missing from Resources; callers keep what they already had for them.
	FailedGroups map[schema.GroupVersion]error
	// Ignored are the deletable resources served that the ignored set left out.
	Ignored ResourceSet
}

// Discoverer is the part of the discovery client cascade uses.
type Discoverer interface {
	ServerPreferredResourcesWithContext(ctx context.Context) ([]*metav1.APIResourceList, error)
}

// DefaultIgnoredResources is policy.DefaultIgnoredResources as a set (core and events.k8s.io
// events, as in-tree).
func DefaultIgnoredResources() map[schema.GroupResource]struct{} {
	out := map[schema.GroupResource]struct{}{}
	for _, gr := range policy.DefaultIgnoredResources() {
		out[schema.GroupResource{Group: gr.Group, Resource: gr.Resource}] = struct{}{}
	}
	return out
}

// DiscoverDeletable lists every resource that supports list, watch and delete at its group's
// preferred version, minus ignored ones and subresources. A partial failure (some groups could
// not be discovered) returns what was found plus the failed groups, not an error; only a total
// failure is an error.
func DiscoverDeletable(ctx context.Context, disco Discoverer, ignored map[schema.GroupResource]struct{}) (DiscoveryResult, error) {
	lists, err := disco.ServerPreferredResourcesWithContext(ctx)
	res := DiscoveryResult{Resources: ResourceSet{}, Ignored: ResourceSet{}}
	if err != nil {
		var gdf *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &gdf) {
			return res, fmt.Errorf("discover preferred resources: %w", err)
		}
		res.FailedGroups = make(map[schema.GroupVersion]error, len(gdf.Groups))
		for gv, gerr := range gdf.Groups {
			res.FailedGroups[gv] = gerr
		}
	}
	for _, list := range discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"delete", "list", "watch"}}, lists) {
		gv, perr := schema.ParseGroupVersion(list.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") { // subresources are not objects
				continue
			}
			gvr := gv.WithResource(r.Name)
			if _, skip := ignored[schema.GroupResource{Group: gv.Group, Resource: r.Name}]; skip {
				res.Ignored[gvr] = Resource{GVR: gvr, Kind: r.Kind, Namespaced: r.Namespaced}
				continue
			}
			res.Resources[gvr] = Resource{GVR: gvr, Kind: r.Kind, Namespaced: r.Namespaced}
		}
	}
	if len(res.Resources) == 0 && len(res.FailedGroups) > 0 {
		return res, fmt.Errorf("discovery found no resources; failed groups: %s", failedGroupNames(res.FailedGroups))
	}
	return res, nil
}

// Sorted returns the resources ordered by group, version, resource (stable logs and tests).
func (s ResourceSet) Sorted() []Resource {
	out := make([]Resource, 0, len(s))
	for _, r := range s {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Resource) int { return gvrCmp(a.GVR, b.GVR) })
	return out
}

// Diff returns the resources in next but not in s (added) and in s but not next (removed).
func (s ResourceSet) Diff(next ResourceSet) (added, removed []schema.GroupVersionResource) {
	for gvr := range next {
		if _, ok := s[gvr]; !ok {
			added = append(added, gvr)
		}
	}
	for gvr := range s {
		if _, ok := next[gvr]; !ok {
			removed = append(removed, gvr)
		}
	}
	slices.SortFunc(added, gvrCmp)
	slices.SortFunc(removed, gvrCmp)
	return added, removed
}

func gvrCmp(a, b schema.GroupVersionResource) int {
	if c := strings.Compare(a.Group, b.Group); c != 0 {
		return c
	}
	if c := strings.Compare(a.Version, b.Version); c != 0 {
		return c
	}
	return strings.Compare(a.Resource, b.Resource)
}

// GVRString renders a resource as resource.version.group (core: resource.v1), the form used in
// logs and metric labels.
func GVRString(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource + "." + gvr.Version
	}
	return gvr.Resource + "." + gvr.Version + "." + gvr.Group
}

func failedGroupNames(m map[schema.GroupVersion]error) string {
	names := make([]string, 0, len(m))
	for gv := range m {
		names = append(names, gv.String())
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// String is for logs.
func (r Resource) String() string {
	return fmt.Sprintf("%s (%s, namespaced=%t)", GVRString(r.GVR), r.Kind, r.Namespaced)
}
