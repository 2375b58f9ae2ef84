package fleet

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Source is one member as a provider reports it.
type Source struct {
	// Kubeconfig is the member's kubeconfig (its current context is used), untrusted data:
	// RESTConfig takes its allowed fields only.
	Kubeconfig []byte
	// Origin says where it came from, for logs and Events: "Secret NS/NAME", "file PATH".
	Origin string
	// Object is the host object it came from (its Secret), for Warning Events on it; nil for
	// a file.
	Object *corev1.ObjectReference
	// Err, when set, is why the provider could not make a kubeconfig of it (a file path outside
	// the directory provider's directory): the member is down with it.
	Err error
}

// Provider reports the fleet's member set: Run calls update with the whole set whenever it may
// have changed (and once at start, when the provider has synced), until ctx ends. A member
// that is in one set and not in the next has left the fleet.
type Provider interface {
	Run(ctx context.Context, update func(map[string]Source)) error
}

// The kubeconfig Secrets provider's key (multicluster-runtime's kubeconfig provider).
const kubeconfigKey = "kubeconfig"

// SecretsProvider reports members from the Secrets of one host namespace that match a label
// selector, multicluster-runtime's kubeconfig Secrets: the kubeconfig under the key
// "kubeconfig", the member named after the Secret. It lists and watches them (no get); it
// keeps of each only that key.
type SecretsProvider struct {
	Client    kubernetes.Interface
	Namespace string
	Selector  string
}

// secretRef is the reference Warning Events about a member are written on.
func secretRef(namespace, name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Secret", APIVersion: "v1", Namespace: namespace, Name: name, UID: uid}
}

// member is the member a Secret stands for, if any.
func (p *SecretsProvider) member(s *corev1.Secret) (string, Source, bool) {
	if len(s.Data[kubeconfigKey]) == 0 {
		return "", Source{}, false
	}
	return s.Name, Source{Kubeconfig: s.Data[kubeconfigKey], Origin: "Secret " + s.Namespace + "/" + s.Name, Object: secretRef(s.Namespace, s.Name, s.UID)}, true
}

// keepKubeconfigOnly is the cache's transform of a listed or watched Secret: its kubeconfig
// key, name, namespace, UID and resourceVersion; no other key, no annotation (kubectl's
// last-applied-configuration holds the whole Secret), no managedFields.
func keepKubeconfigOnly(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	out := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion}, Type: s.Type}
	if v, ok := s.Data[kubeconfigKey]; ok {
		out.Data = map[string][]byte{kubeconfigKey: v}
	}
	return out, nil
}

func (p *SecretsProvider) Run(ctx context.Context, update func(map[string]Source)) error {
	factory := informers.NewSharedInformerFactoryWithOptions(p.Client, 0, informers.WithNamespace(p.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = p.Selector }),
		informers.WithTransform(keepKubeconfigOnly))
	inf := factory.Core().V1().Secrets().Informer()
	changed := make(chan struct{}, 1)
	if _, err := inf.AddEventHandler(pokeHandler(changed)); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	lister := factory.Core().V1().Secrets().Lister().Secrets(p.Namespace)
	for {
		secrets, err := lister.List(labels.Everything())
		if err != nil {
			return err
		}
		set := map[string]Source{}
		for _, s := range secrets {
			if name, src, ok := p.member(s); ok {
				set[name] = src
			}
		}
		update(set)
		if !waitForChange(ctx, changed, 0) {
			return nil
		}
	}
}

// pokeHandler signals changed (without blocking) on every add, update and delete.
func pokeHandler(changed chan struct{}) cache.ResourceEventHandler {
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke}
}

// waitForChange waits for a change (or, with retry above 0, at most retry), then a little more
// so that a burst of changes (a rotation touches several Secrets) is taken together; false
// when ctx ended.
func waitForChange(ctx context.Context, changed <-chan struct{}, retry time.Duration) bool {
	var timeout <-chan time.Time
	if retry > 0 {
		t := time.NewTimer(retry)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-changed:
	case <-timeout:
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(200 * time.Millisecond):
		return true
	}
}

// Cluster API's kubeconfig Secret convention.
const (
	CAPISecretType   = "cluster.x-k8s.io/secret"
	CAPIClusterLabel = "cluster.x-k8s.io/cluster-name"
	capiSuffix       = "-kubeconfig"
	capiKey          = "value"
)

// ClusterAPIProvider reports a member for each Cluster API cluster of one host namespace: the
// Secret CLUSTER-kubeconfig (type cluster.x-k8s.io/secret, labelled
// cluster.x-k8s.io/cluster-name=CLUSTER, the kubeconfig under the key "value"), the member
// named CLUSTER. Cluster API gives the same type and label to every Secret of a cluster: its
// CA, etcd, service-account and front-proxy keys and its machines' bootstrap data. So the
// provider lists and watches the namespace's Secrets as metadata only (names and labels, no
// annotation), and reads each CLUSTER-kubeconfig by name when its resourceVersion changes: no
// other Secret's data is ever read.
type ClusterAPIProvider struct {
	// Metadata lists and watches; Client reads the kubeconfig Secrets by name.
	Metadata  metadata.Interface
	Client    kubernetes.Interface
	Namespace string
	// Retry is how soon a kubeconfig Secret that could not be read is read again (10s when 0).
	Retry time.Duration
}

var secretsResource = corev1.SchemeGroupVersion.WithResource("secrets")

// keepNameAndCluster is the cache's transform of a listed or watched Secret's metadata: its
// name, namespace, UID, resourceVersion and Cluster API cluster label; nothing else.
func keepNameAndCluster(obj any) (any, error) {
	o, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: o.TypeMeta, ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion}}
	if c, ok := o.Labels[CAPIClusterLabel]; ok {
		out.Labels = map[string]string{CAPIClusterLabel: c}
	}
	return out, nil
}

// capiRead is a kubeconfig Secret as last read: at its metadata's resourceVersion, the member
// it stands for (ok false: none).
type capiRead struct {
	resourceVersion string
	src             Source
	ok              bool
}

func (p *ClusterAPIProvider) Run(ctx context.Context, update func(map[string]Source)) error {
	logger := klog.FromContext(ctx)
	retry := p.Retry
	if retry <= 0 {
		retry = 10 * time.Second
	}
	inf := metadatainformer.NewFilteredMetadataInformer(p.Metadata, secretsResource, p.Namespace, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = "type=" + CAPISecretType
		o.LabelSelector = CAPIClusterLabel
	}).Informer()
	if err := inf.SetTransform(keepNameAndCluster); err != nil {
		return err
	}
	changed := make(chan struct{}, 1)
	if _, err := inf.AddEventHandler(pokeHandler(changed)); err != nil {
		return err
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	read := map[string]capiRead{} // by Secret name
	for {
		set := map[string]Source{}
		failed := false
		seen := map[string]bool{}
		for _, obj := range inf.GetStore().List() {
			o, ok := obj.(*metav1.PartialObjectMetadata)
			if !ok {
				continue
			}
			cluster := o.Labels[CAPIClusterLabel]
			if cluster == "" || o.Name != cluster+capiSuffix {
				continue // a CA, etcd, service-account or proxy key, bootstrap data: never read
			}
			seen[o.Name] = true
			r, ok := read[o.Name]
			if !ok || r.resourceVersion != o.ResourceVersion {
				var err error
				if r, err = p.read(ctx, cluster, o); err != nil {
					logger.Error(SafeError(err), "Cannot read a Cluster API kubeconfig Secret; keeping what was read before, reading it again later", "secret", p.Namespace+"/"+o.Name, "retryIn", retry)
					failed = true
					r = read[o.Name] // what was read before, if anything
				} else {
					read[o.Name] = r
				}
			}
			if r.ok {
				set[cluster] = r.src
			}
		}
		maps.DeleteFunc(read, func(name string, _ capiRead) bool { return !seen[name] })
		update(set)
		wait := time.Duration(0)
		if failed {
			wait = retry
		}
		if !waitForChange(ctx, changed, wait) {
			return nil
		}
	}
}

// read reads cluster's kubeconfig Secret o by name and keeps its kubeconfig only if it is
// still Cluster API's kubeconfig Secret of that cluster. A Secret gone since is no member.
func (p *ClusterAPIProvider) read(ctx context.Context, cluster string, o *metav1.PartialObjectMetadata) (capiRead, error) {
	s, err := p.Client.CoreV1().Secrets(p.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return capiRead{resourceVersion: o.ResourceVersion}, nil
	}
	if err != nil {
		return capiRead{}, err
	}
	r := capiRead{resourceVersion: o.ResourceVersion}
	if string(s.Type) != CAPISecretType || s.Labels[CAPIClusterLabel] != cluster || len(s.Data[capiKey]) == 0 {
		return r, nil
	}
	r.ok = true
	r.src = Source{Kubeconfig: s.Data[capiKey], Origin: "Secret " + s.Namespace + "/" + s.Name, Object: secretRef(s.Namespace, s.Name, s.UID)}
	return r, nil
}

// DirProvider reports members from the kubeconfig files of a directory, read again every
// Period: each regular file (not hidden: a mounted Secret's ..data links are skipped) is a
// member named after the file without its extension. A kubeconfig may name files inside the
// directory only (InlineFiles): their contents are part of the member's source, so a rotated
// certificate restarts the member.
type DirProvider struct {
	Dir    string
	Period time.Duration
}

func (p *DirProvider) Run(ctx context.Context, update func(map[string]Source)) error {
	var last map[string][32]byte
	for {
		set, err := p.read()
		if err != nil {
			klog.FromContext(ctx).Error(err, "Cannot read the fleet's kubeconfig directory; keeping the members", "dir", p.Dir)
		} else {
			sums := make(map[string][32]byte, len(set))
			for name, src := range set {
				sums[name] = sourceHash(src)
			}
			if last == nil || !maps.Equal(sums, last) {
				update(set)
				last = sums
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.Period):
		}
	}
}

// read is the members the directory holds now.
func (p *DirProvider) read() (map[string]Source, error) {
	entries, err := os.ReadDir(p.Dir)
	if err != nil {
		return nil, err
	}
	set := map[string]Source{}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.IsDir() {
			continue
		}
		path := filepath.Join(p.Dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		name := strings.TrimSuffix(e.Name(), filepath.Ext(e.Name()))
		src := Source{Kubeconfig: b, Origin: "file " + path}
		if inlined, err := InlineFiles(b, p.Dir); err != nil {
			src.Err = err
		} else {
			src.Kubeconfig = inlined
		}
		set[name] = src
	}
	return set, errors.Join(errs...)
}
