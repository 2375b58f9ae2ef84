package features

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The group of the admission policies, and their resources.
const (
	admissionGroup   = "admissionregistration.k8s.io"
	policiesResource = "mutatingadmissionpolicies"
	bindingsResource = "mutatingadmissionpolicybindings"
	versionV1        = "v1"
	versionV1beta1   = "v1beta1"
	admissionV1      = admissionGroup + "/" + versionV1
	admissionV1beta1 = admissionGroup + "/" + versionV1beta1
)

// GroupVersionResources is the part of the discovery client detection reads
// (*discovery.DiscoveryClient has it).
type GroupVersionResources interface {
	ServerResourcesForGroupVersionWithContext(ctx context.Context, groupVersion string) (*metav1.APIResourceList, error)
}

// Admission is which versions of the MutatingAdmissionPolicy and its binding the server
// serves.
type Admission struct {
	V1, V1beta1 bool
}

// Level is the best level served: v1, else v1beta1, else none.
func (a Admission) Level() string {
	switch {
	case a.V1:
		return LevelV1
	case a.V1beta1:
		return LevelV1beta1
	}
	return LevelNone
}

// DetectAdmission asks discovery which versions serve both the MutatingAdmissionPolicy and its
// binding: one request per version (the group-version's discovery document). A version the
// server does not know (404) is not served; any other failure is an error, and the caller
// keeps what it knew.
func DetectAdmission(ctx context.Context, disco GroupVersionResources) (Admission, error) {
	served := func(gv string) (bool, error) {
		list, err := disco.ServerResourcesForGroupVersionWithContext(ctx, gv)
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("discovering %s: %w", gv, err)
		}
		var p, b bool
		for _, r := range list.APIResources {
			p = p || r.Name == policiesResource && hasVerbs(r.Verbs)
			b = b || r.Name == bindingsResource && hasVerbs(r.Verbs)
		}
		return p && b, nil
	}
	var a Admission
	var err error
	if a.V1, err = served(admissionV1); err != nil {
		return Admission{}, err
	}
	if a.V1beta1, err = served(admissionV1beta1); err != nil {
		return Admission{}, err
	}
	return a, nil
}

// hasVerbs: cascade reads, applies (patch) and deletes its admission objects.
func hasVerbs(verbs metav1.Verbs) bool {
	for _, v := range []string{"get", "patch", "delete"} {
		if !slices.Contains(verbs, v) {
			return false
		}
	}
	return true
}
