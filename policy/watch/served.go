package watch

import (
	"context"
	"errors"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/cascade-gc/cascade/policy"
)

// ServedBy returns what the cluster serves according to discovery, for policy.Warnings. A
// resource of an API group whose discovery failed counts as served: no warning rests on a
// failure.
func ServedBy(disco discovery.ServerResourcesInterface) func(context.Context) (policy.Served, error) {
	return func(context.Context) (policy.Served, error) {
		_, lists, err := disco.ServerGroupsAndResources()
		failed := map[string]bool{}
		if err != nil {
			var gdf *discovery.ErrGroupDiscoveryFailed
			if !errors.As(err, &gdf) {
				return policy.Served{}, err
			}
			for gv := range gdf.Groups {
				failed[gv.Group] = true
			}
		}
		served := map[policy.GroupResource]bool{}
		for _, l := range lists {
			gv, perr := schema.ParseGroupVersion(l.GroupVersion)
			if perr != nil {
				continue
			}
			for _, r := range l.APIResources {
				if !strings.Contains(r.Name, "/") {
					served[policy.GroupResource{Group: gv.Group, Resource: r.Name}] = true
				}
			}
		}
		return policy.Served{Resource: func(gr policy.GroupResource) bool { return served[gr] || failed[gr.Group] }}, nil
	}
}
