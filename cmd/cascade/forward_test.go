package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

func cascadePod(name string, ready bool, port int32) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "cascade-system", Labels: map[string]string{"app.kubernetes.io/name": "cascade"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "cascade", Ports: []corev1.ContainerPort{
			{Name: "health", ContainerPort: 8081}, {Name: servingPortName, ContainerPort: port},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

// TestPickCascadePod: explain's port-forward goes to the Lease holder's pod when it is ready,
// else to the first ready pod by name; never to a pod that is not ready, nor to a pod without
// cascade's label; the port is the pod's own "metrics" port.
func TestPickCascadePod(t *testing.T) {
	lease := func(holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "cascade", Namespace: "cascade-system"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)}}
	}
	other := cascadePod("other", true, 9443)
	other.Labels = map[string]string{"app": "other"}
	for _, tc := range []struct {
		name     string
		objs     []runtime.Object
		wantPod  string
		wantPort int
		wantErr  string
	}{
		{"the leader's", []runtime.Object{cascadePod("cascade-a", true, 8443), cascadePod("cascade-b", true, 9443), lease("cascade-b_x1y2")}, "cascade-b", 9443, ""},
		{"leader not ready", []runtime.Object{cascadePod("cascade-a", true, 8443), cascadePod("cascade-b", false, 9443), lease("cascade-b_x1y2")}, "cascade-a", 8443, ""},
		{"no Lease", []runtime.Object{cascadePod("cascade-b", true, 8443), cascadePod("cascade-a", true, 8443)}, "cascade-a", 8443, ""},
		{"holder not a pod", []runtime.Object{cascadePod("cascade-a", true, 8443), lease("laptop_abc")}, "cascade-a", 8443, ""},
		{"none ready", []runtime.Object{cascadePod("cascade-a", false, 8443), other}, "", 0, "no ready pod of cascade in namespace cascade-system (1 selected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, port, err := pickCascadePod(context.Background(), fake.NewClientset(tc.objs...), "cascade-system", "cascade")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || pod != tc.wantPod || port != tc.wantPort {
				t.Fatalf("got %s:%d, %v; want %s:%d", pod, port, err, tc.wantPod, tc.wantPort)
			}
		})
	}
}

// TestAggregatedAPIInstalled: explain goes through the API server when cascade's group version
// is registered (served, or registered but unavailable: the API server's answer then says
// why), and port-forwards only when the API server has no such group (404).
func TestAggregatedAPIInstalled(t *testing.T) {
	for _, tc := range []struct {
		code int
		want bool
	}{{http.StatusOK, true}, {http.StatusServiceUnavailable, true}, {http.StatusForbidden, true}, {http.StatusNotFound, false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/apis/debug.cascade.dev/v1alpha1" {
				t.Errorf("asked %s", r.URL.Path)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.code)
			_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"debug.cascade.dev/v1alpha1","resources":[]}`))
		}))
		disco, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		got, err := aggregatedAPIInstalled(context.Background(), disco)
		srv.Close()
		if err != nil || got != tc.want {
			t.Errorf("answer %d: installed %t, %v; want %t", tc.code, got, err, tc.want)
		}
	}
}
