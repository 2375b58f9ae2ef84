//go:build e2e

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// The aggregated API of the "apiservice" fault: a real backend, served by the test process over
// TLS, registered with kube-apiserver through an APIService whose Service has an EndpointSlice
// naming this machine's address (kube-apiserver runs with --enable-aggregator-routing, so it
// dials the endpoint itself: there is no kube-proxy). The fault stops the backend (the
// APIService turns unavailable and discovery of its group fails, so cascade's discovery is
// partial) and starts it again on the same port (the group comes back).

const (
	aggGroup       = "agg.chaos.cascade.dev"
	aggVersion     = "v1alpha1"
	apiServiceName = aggVersion + "." + aggGroup
	aggService     = "chaos-agg"
)

// aggBackend serves discovery for aggGroup/aggVersion: the group and its (empty) resource list.
type aggBackend struct {
	host string // a non-loopback address of this machine
	port int    // fixed once chosen, so the EndpointSlice stays right across restarts

	mu  sync.Mutex
	srv *httptest.Server // nil while down
}

// hostAddress returns a non-loopback IPv4 address of this machine: an EndpointSlice may not
// name a loopback address.
func hostAddress() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && ip.IP.IsGlobalUnicast() && !ip.IP.IsLoopback() {
			return ip.IP.String(), nil
		}
	}
	return "", errors.New("no non-loopback IPv4 address on this machine for the aggregated API's endpoint")
}

func newAggBackend() (*aggBackend, error) {
	host, err := hostAddress()
	if err != nil {
		return nil, err
	}
	b := &aggBackend{host: host}
	if err := b.start(); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *aggBackend) handler() http.Handler {
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	gv := aggGroup + "/" + aggVersion
	mux.HandleFunc("/apis", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, metav1.APIGroupList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups: []metav1.APIGroup{{Name: aggGroup,
				Versions:         []metav1.GroupVersionForDiscovery{{GroupVersion: gv, Version: aggVersion}},
				PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: aggVersion}}},
		})
	})
	mux.HandleFunc("/apis/"+gv, func(w http.ResponseWriter, _ *http.Request) {
		reply(w, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv, APIResources: []metav1.APIResource{}})
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return mux
}

// start serves on the backend's port (any free one the first time).
func (b *aggBackend) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv != nil {
		return nil
	}
	var ln net.Listener
	var err error
	for range 50 { // the port may linger briefly after stop
		if ln, err = net.Listen("tcp", net.JoinHostPort(b.host, strconv.Itoa(b.port))); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("aggregated API backend: %w", err)
	}
	b.port = ln.Addr().(*net.TCPAddr).Port
	srv := httptest.NewUnstartedServer(b.handler())
	srv.Listener = ln
	srv.StartTLS()
	b.srv = srv
	return nil
}

// stop closes the backend: connections are refused until start.
func (b *aggBackend) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv != nil {
		b.srv.CloseClientConnections()
		b.srv.Close()
		b.srv = nil
	}
}

func (b *aggBackend) up() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.srv != nil
}

// registerAggregated creates the Service, its EndpointSlice and the APIService for the backend.
func (cl *cluster) registerAggregated(ctx context.Context) error {
	port := int64(cl.agg.port)
	objs := []struct {
		gvr schema.GroupVersionResource
		ns  string
		obj map[string]any
	}{
		{schema.GroupVersionResource{Version: "v1", Resource: "services"}, systemNamespace, map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": aggService, "namespace": systemNamespace},
			"spec":     map[string]any{"ports": []any{map[string]any{"name": "https", "port": int64(443), "targetPort": port}}},
		}},
		{schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, systemNamespace, map[string]any{
			"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
			"metadata": map[string]any{"name": aggService, "namespace": systemNamespace,
				"labels": map[string]any{"kubernetes.io/service-name": aggService}},
			"addressType": "IPv4",
			"endpoints":   []any{map[string]any{"addresses": []any{cl.agg.host}, "conditions": map[string]any{"ready": true}}},
			"ports":       []any{map[string]any{"name": "https", "port": port, "protocol": "TCP"}},
		}},
		{apiServiceGVR, "", map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": apiServiceName},
			"spec": map[string]any{
				"group": aggGroup, "version": aggVersion,
				"service":               map[string]any{"namespace": systemNamespace, "name": aggService, "port": int64(443)},
				"insecureSkipTLSVerify": true, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			},
		}},
	}
	for _, o := range objs {
		_, err := cl.api.dyn.Resource(o.gvr).Namespace(o.ns).Create(ctx, &unstructured.Unstructured{Object: o.obj}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s %s: %w", o.gvr.Resource, o.obj["metadata"].(map[string]any)["name"], err)
		}
	}
	return nil
}

// waitAggregated waits until kube-apiserver reports the APIService available (want true) or not.
func (cl *cluster) waitAggregated(ctx context.Context, want bool) error {
	for {
		as, err := cl.api.dyn.Resource(apiServiceGVR).Get(ctx, apiServiceName, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(as.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Available" && (m["status"] == "True") == want {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("APIService %s never became available=%t: %w (last error: %v)", apiServiceName, want, ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitGroupFailing waits until a request for the aggregated group, through kube-apiserver,
// fails: the fault took effect for every client, cascade included.
func (cl *cluster) waitGroupFailing(ctx context.Context) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cl.cp.RestConfig())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, err := dc.ServerResourcesForGroupVersion(aggGroup + "/" + aggVersion); err != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the aggregated API %s still answers after its backend stopped", apiServiceName)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
