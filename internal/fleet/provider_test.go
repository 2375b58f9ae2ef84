package fleet

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: Y2E=
users:
- name: u
  user:
    token: secret-token
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

// sets records every member set a provider reports.
type sets struct {
	mu  sync.Mutex
	all []map[string]Source
}

func (s *sets) update(set map[string]Source) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, set)
}

func (s *sets) last() map[string]Source {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.all) == 0 {
		return nil
	}
	return s.all[len(s.all)-1]
}

// waitFor waits until the last set satisfies ok.
func (s *sets) waitFor(t *testing.T, what string, ok func(map[string]Source) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if l := s.last(); l != nil && ok(l) {
			return
		}
	}
	t.Fatalf("%s: last member set %v", what, s.last())
}

func kubeconfigs(set map[string]Source) map[string]string {
	out := map[string]string{}
	for n, s := range set {
		out[n] = string(s.Kubeconfig)
	}
	return out
}

// TestSecretsProviderFollowsChanges: the provider hands over the whole member set at start and
// after each change of the Secrets: added, rotated, removed; a Secret without the key
// kubeconfig is no member; Events go on the member's Secret.
func TestSecretsProviderFollowsChanges(t *testing.T) {
	kube := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "a", UID: "uid-a"}, Data: map[string][]byte{"kubeconfig": []byte("one"), "other": []byte("x")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "nokey"}, Data: map[string][]byte{"config": []byte("one")}},
	)
	p := &SecretsProvider{Client: kube, Namespace: "fleet"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var s sets
	go func() { _ = p.Run(ctx, s.update) }()
	s.waitFor(t, "start", func(m map[string]Source) bool { return len(m) == 1 && string(m["a"].Kubeconfig) == "one" })
	if ref := s.last()["a"].Object; ref == nil || ref.Kind != "Secret" || ref.Namespace != "fleet" || ref.Name != "a" || ref.UID != "uid-a" {
		t.Errorf("the member's Secret: %+v", ref)
	}
	secrets := kube.CoreV1().Secrets("fleet")
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Data: map[string][]byte{"kubeconfig": []byte("two")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "added", func(m map[string]Source) bool { return kubeconfigs(m)["b"] == "two" && len(m) == 2 })
	if _, err := secrets.Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string][]byte{"kubeconfig": []byte("rotated")}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "rotated", func(m map[string]Source) bool { return kubeconfigs(m)["a"] == "rotated" })
	if err := secrets.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "removed", func(m map[string]Source) bool { _, ok := m["b"]; return !ok && len(m) == 1 })
	for _, a := range kube.Actions() {
		if a.GetResource().Resource == "secrets" && a.GetVerb() == "get" {
			t.Errorf("the provider read a Secret by name (%v): it lists and watches only", a)
		}
	}
}

// TestKeepKubeconfigOnly: what the Secrets provider's cache keeps of a Secret: its kubeconfig,
// no other key, no annotation (kubectl's last-applied-configuration holds the whole Secret).
func TestKeepKubeconfigOnly(t *testing.T) {
	in := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "a", UID: "u", ResourceVersion: "7",
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"tls.key":"secret"}}`},
			Labels:      map[string]string{"x": "y"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Data: map[string][]byte{"kubeconfig": []byte("k"), "tls.key": []byte("secret")},
	}
	out, err := keepKubeconfigOnly(in)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Secret)
	if len(s.Data) != 1 || string(s.Data["kubeconfig"]) != "k" || s.Annotations != nil || s.ManagedFields != nil || s.Name != "a" || s.UID != "u" || s.ResourceVersion != "7" {
		t.Errorf("kept %+v", s)
	}
}

// capiSecret is one Secret of Cluster API's set for a cluster: every one has the type and the
// cluster label; some were applied with kubectl, their whole content in an annotation.
func capiSecret(cluster, name, key, value string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
			Labels:      map[string]string{CAPIClusterLabel: cluster},
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"` + key + `":"` + value + `"}}`}},
		Type: CAPISecretType,
		Data: map[string][]byte{key: []byte(value)},
	}
}

// capiFullSet is what Cluster API keeps for one cluster: its kubeconfig, its CA, etcd CA,
// service-account and front-proxy keys, and a machine's bootstrap data.
func capiFullSet(cluster string) []*corev1.Secret {
	return []*corev1.Secret{
		capiSecret(cluster, cluster+"-kubeconfig", "value", "kubeconfig of "+cluster),
		capiSecret(cluster, cluster+"-ca", "tls.key", "CA KEY OF "+cluster),
		capiSecret(cluster, cluster+"-etcd", "tls.key", "ETCD KEY OF "+cluster),
		capiSecret(cluster, cluster+"-sa", "tls.key", "SA KEY OF "+cluster),
		capiSecret(cluster, cluster+"-proxy", "tls.key", "PROXY KEY OF "+cluster),
		capiSecret(cluster, cluster+"-md-0-x7k2p", "value", "BOOTSTRAP DATA OF "+cluster),
	}
}

// asMetadata is a Secret as a metadata list or watch returns it: everything but its data.
func asMetadata(s *corev1.Secret) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: s.TypeMeta, ObjectMeta: *s.ObjectMeta.DeepCopy()}
}

// TestClusterAPIProviderReadsOnlyKubeconfigs: with Cluster API's full set of Secrets for two
// clusters, the provider reports the two clusters from their kubeconfigs, reads no Secret's
// data but the two CLUSTER-kubeconfig ones (by name: no list or watch of whole Secrets), keeps
// of every other Secret its name and cluster label only (no annotation, where kubectl keeps a
// copy of the keys), and reads a kubeconfig again only when it changed.
func TestClusterAPIProviderReadsOnlyKubeconfigs(t *testing.T) {
	var full, meta []runtime.Object
	for _, c := range []string{"prod", "dev"} {
		for _, s := range capiFullSet(c) {
			full = append(full, s)
			meta = append(meta, asMetadata(s))
		}
	}
	kube := fake.NewClientset(full...)
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	md := metadatafake.NewSimpleMetadataClient(scheme, meta...)
	p := &ClusterAPIProvider{Metadata: md, Client: kube, Namespace: "capi"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var s sets
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx, s.update)
	}()
	s.waitFor(t, "start", func(m map[string]Source) bool { return len(m) == 2 })
	got := kubeconfigs(s.last())
	if got["prod"] != "kubeconfig of prod" || got["dev"] != "kubeconfig of dev" {
		t.Errorf("members %v", got)
	}
	reads := func() []string {
		var out []string
		for _, a := range kube.Actions() {
			switch a := a.(type) {
			case clienttesting.GetAction:
				out = append(out, a.GetVerb()+" "+a.GetName())
			default:
				out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
			}
		}
		slices.Sort(out)
		return out
	}
	if r := reads(); !slices.Equal(r, []string{"get dev-kubeconfig", "get prod-kubeconfig"}) {
		t.Errorf("reads of whole Secrets %v, want the two kubeconfigs by name only", r)
	}
	for _, a := range md.Actions() {
		if v := a.GetVerb(); v != "list" && v != "watch" {
			t.Errorf("metadata action %v", a)
		}
	}
	// A rotation of one kubeconfig reads that one again, nothing else.
	rotated := capiSecret("prod", "prod-kubeconfig", "value", "rotated kubeconfig of prod")
	rotated.ResourceVersion = "2"
	if _, err := kube.CoreV1().Secrets("capi").Update(ctx, rotated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := md.Resource(secretsResource).Namespace("capi").(fakeUpdater).UpdateFake(asMetadata(rotated), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "rotated", func(m map[string]Source) bool { return kubeconfigs(m)["prod"] == "rotated kubeconfig of prod" })
	if r := reads(); !slices.Equal(r, []string{"get dev-kubeconfig", "get prod-kubeconfig", "get prod-kubeconfig", "update secrets"}) {
		t.Errorf("reads after a rotation %v", r)
	}
	// The cluster's Secrets gone: no member.
	if err := md.Resource(secretsResource).Namespace("capi").Delete(ctx, "dev-kubeconfig", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "removed", func(m map[string]Source) bool { _, ok := m["dev"]; return !ok && len(m) == 1 })
	cancel()
	<-done
	// What the cache held: checked on the transform the informer applies to each object.
	for _, obj := range meta {
		kept, err := keepNameAndCluster(obj)
		if err != nil {
			t.Fatal(err)
		}
		k := kept.(*metav1.PartialObjectMetadata)
		if k.Annotations != nil || len(k.Labels) != 1 || k.ManagedFields != nil {
			t.Errorf("the cache keeps of %s: %+v", k.Name, k.ObjectMeta)
		}
	}
	for _, set := range s.all {
		for _, src := range set {
			if strings.Contains(string(src.Kubeconfig), "KEY") || strings.Contains(string(src.Kubeconfig), "BOOTSTRAP") {
				t.Errorf("a member's source holds another Secret's data: %q", src.Kubeconfig)
			}
		}
	}
}

// fakeUpdater is the fake metadata client's update.
type fakeUpdater interface {
	UpdateFake(*metav1.PartialObjectMetadata, metav1.UpdateOptions, ...string) (*metav1.PartialObjectMetadata, error)
}

// TestDirProvider: each regular file is a member named after it without its extension; hidden
// entries (a mounted Secret's ..data) and directories are not; a file path inside the
// directory is inlined (so the source changes with the file), one outside it is the member's
// error, not a read.
func TestDirProvider(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pki"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pki", "ca.crt"), []byte("CA"), 0o600); err != nil {
		t.Fatal(err)
	}
	withFile := strings.Replace(testKubeconfig, "certificate-authority-data: Y2E=", "certificate-authority: pki/ca.crt", 1)
	outside := strings.Replace(testKubeconfig, "token: secret-token", "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token", 1)
	for name, body := range map[string]string{"tenant-a.kubeconfig": withFile, "tenant-b": testKubeconfig, "tenant-c.yaml": outside, ".hidden": "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "..data"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := &DirProvider{Dir: dir}
	set, err := p.read()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"tenant-a", "tenant-b", "tenant-c"}) {
		t.Fatalf("members %v, want tenant-a, tenant-b, tenant-c", names)
	}
	if set["tenant-a"].Err != nil || set["tenant-b"].Err != nil {
		t.Errorf("errors: a %v, b %v", set["tenant-a"].Err, set["tenant-b"].Err)
	}
	if set["tenant-c"].Err == nil || !strings.Contains(set["tenant-c"].Err.Error(), "tokenFile") {
		t.Errorf("a token file outside the directory: %v, want an error naming tokenFile", set["tenant-c"].Err)
	}
	cfg, err := RESTConfig(set["tenant-a"].Kubeconfig, KubeconfigOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.CAData) != "CA" || cfg.CAFile != "" {
		t.Errorf("CA data %q, file %q: want the file's contents inlined", cfg.CAData, cfg.CAFile)
	}
	// A rotated CA file changes the member's source.
	if err := os.WriteFile(filepath.Join(dir, "pki", "ca.crt"), []byte("CA 2"), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := p.read()
	if err != nil {
		t.Fatal(err)
	}
	if sourceHash(again["tenant-a"]) == sourceHash(set["tenant-a"]) {
		t.Error("a rotated CA file did not change the member's source")
	}
	if sourceHash(again["tenant-b"]) != sourceHash(set["tenant-b"]) {
		t.Error("an unchanged member's source changed")
	}
}
