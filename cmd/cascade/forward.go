package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
)

// cascade explain's default way to cascade when its aggregated API is not installed (the
// default: an APIService without a backend would make every namespace deletion in the cluster
// wait for cascade, docs/security.md): a port-forward through the API server to one of
// cascade's pods, as `kubectl port-forward` does, and the explanation asked of that pod at the
// aggregated API's own path with the kubeconfig user's credentials. cascade authenticates the
// user (TokenReview, or a client certificate of the cluster's client CA) and authorizes `get
// explanations` in the object's namespace, exactly as when the API server forwards the
// request: the same RBAC answers both ways. The user needs, besides, what a port-forward needs
// in cascade's namespace: list pods and create pods/portforward (the Role
// cascade-explain-port-forward of deploy/base and the chart, bound by the cluster's admins).

// cascadePodSelector selects cascade's pods in its namespace (deploy/base's and the chart's
// common label).
const cascadePodSelector = "app.kubernetes.io/name=cascade"

// servingPortName is the name of cascade's metrics and API container port in deploy/base and the
// chart; metricsPort its number there when a pod does not name it.
const (
	servingPortName = "metrics"
	metricsPort     = 8443
)

// pickCascadePod chooses the pod of cascade to ask: the leader's (the holder of the Lease
// leaseName in ns, whose identity starts with its pod name, internal/leader), else the first
// ready one by name (a standby's graph answers too). It returns the pod's name and the port it
// serves on.
func pickCascadePod(ctx context.Context, kube kubernetes.Interface, ns, leaseName string) (string, int, error) {
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: cascadePodSelector})
	if err != nil {
		return "", 0, fmt.Errorf("cannot list cascade's pods in namespace %s (a port-forward needs list pods and create pods/portforward there): %w", ns, err)
	}
	var ready []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(p) {
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		return "", 0, fmt.Errorf("no ready pod of cascade in namespace %s (%d selected by %s): is cascade running? (--cascade-namespace names its namespace)",
			ns, len(pods.Items), cascadePodSelector)
	}
	slices.SortFunc(ready, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	chosen := ready[0]
	if leaseName != "" {
		lease, err := kube.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
		if err == nil {
			if i := slices.IndexFunc(ready, func(p corev1.Pod) bool { return holdsLease(lease, p.Name) }); i >= 0 {
				chosen = ready[i]
			}
		} else if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
			return "", 0, fmt.Errorf("cannot read cascade's Lease %s/%s: %w", ns, leaseName, err)
		}
	}
	return chosen.Name, servingPort(chosen), nil
}

// holdsLease says whether the pod named pod holds lease: the elector's identity is the pod's
// host name (its name), "_" and a random suffix.
func holdsLease(lease *coordinationv1.Lease, pod string) bool {
	if lease.Spec.HolderIdentity == nil {
		return false
	}
	host, _, ok := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return ok && host == pod
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// servingPort is the container port named servingPortName in p, else metricsPort.
func servingPort(p corev1.Pod) int {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == servingPortName {
				return int(port.ContainerPort)
			}
		}
	}
	return metricsPort
}

// forwardToPod opens a port-forward to port of pod ns/name through the API server of cfg (over
// WebSocket, else SPDY, as kubectl does) on a free port of 127.0.0.1, and returns that local
// port and the function that closes the forward.
func forwardToPod(ctx context.Context, cfg *rest.Config, kube kubernetes.Interface, ns, name string, port int) (int, func(), error) {
	u := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return 0, nil, fmt.Errorf("port-forward transport: %w", err)
	}
	dialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	if ws, err := portforward.NewSPDYOverWebsocketDialerForStreaming(u, cfg); err == nil {
		dialer = portforward.NewFallbackDialerForStreaming(ws, dialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	var errOut strings.Builder
	fw, err := portforward.NewOnAddressesForStreaming(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, stop, ready, io.Discard, &errOut)
	if err != nil {
		return 0, nil, fmt.Errorf("port-forward to pod %s/%s: %w", ns, name, err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	closeFn := func() { close(stop) }
	select {
	case <-ready:
	case err := <-done:
		if err == nil {
			err = errors.New("closed before it was ready")
		}
		return 0, nil, fmt.Errorf("port-forward to pod %s/%s: %w %s", ns, name, err, strings.TrimSpace(errOut.String()))
	case <-ctx.Done():
		closeFn()
		return 0, nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		closeFn()
		return 0, nil, fmt.Errorf("port-forward to pod %s/%s: no local port (%v)", ns, name, err)
	}
	return int(ports[0].Local), closeFn, nil
}

// forwardedClient is the HTTP client that asks cascade through a port-forward on local port
// as the kubeconfig's user (cfg): its bearer token, exec plugin or client certificate. cascade's
// serving certificate is its own (self-signed unless --tls-cert-file names one), so it is not
// verified: the tunnel's far end is the pod the API server chose by name, over the API
// server's verified connection, as with `kubectl port-forward`.
func forwardedClient(cfg *rest.Config, port int) (*http.Client, string, error) {
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	hc, err := cascadeClient(cfg, base, rest.TLSClientConfig{
		Insecure: true,
		CertFile: cfg.CertFile, KeyFile: cfg.KeyFile, CertData: cfg.CertData, KeyData: cfg.KeyData,
	})
	return hc, base, err
}
