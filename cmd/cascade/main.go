// Command cascade is an out-of-tree garbage collector for Kubernetes. main only wires parts:
// flags → Validate → clients → gc.New → Run(ctx).
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/finalizers"
	"github.com/cascade-gc/cascade/finalizers/orphanrecord"
	"github.com/cascade-gc/cascade/finalizers/stamp"
	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/policy"
	"github.com/cascade-gc/cascade/policy/watch"
)

// userAgent identifies cascade's requests in the API server's logs and metrics.
const userAgent = "cascade"

func main() {
	run := run
	if len(os.Args) > 1 {
		if sub, ok := subcommands[os.Args[1]]; ok {
			run = func(args []string) error { return sub(args[1:], os.Stdout) }
		}
	}
	if err := run(os.Args[1:]); err != nil {
		// One line that says what to fix; details are in the structured log above it.
		fmt.Fprintf(os.Stderr, "cascade: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(args []string) error {
	opts := NewOptions()
	fs := pflag.NewFlagSet("cascade", pflag.ContinueOnError)
	opts.AddFlags(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	showVersion := fs.Bool("version", false, "Print the version and commit, and exit.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w (see --help)", err)
	}
	if *showVersion {
		_, err := fmt.Fprintln(stdout, versionLine())
		return err
	}
	if errs := opts.Validate(); len(errs) > 0 {
		return errors.New(oneLine(errs))
	}

	sigCtx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// ctx also ends when leadership is lost: the process exits, and its restart rejoins as a
	// standby with a fresh graph, rather than acting on a view another replica now owns.
	ctx, cancel := context.WithCancelCause(sigCtx)
	defer cancel(nil)
	logger := klog.FromContext(ctx)

	cfg, err := restConfig(opts)
	if err != nil {
		return err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("build discovery client: %w", err)
	}
	if err := waitForServer(ctx, disco, cfg.Host, opts.StartupTimeout); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ms := newMetricSet(reg)
	cfg.Wrap(countRequests(ms.requests))
	workqueue.SetProvider(ms.queues) // before any queue is created
	workMetrics := ms.work

	metaClient, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("build metadata client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("build dynamic client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("build client: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	if opts.DryRun {
		broadcaster.StartStructuredLogging(0) // the Events it would have emitted, in the log only
	} else {
		broadcaster.StartStructuredLogging(3)
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	}
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: gc.EventComponent})

	// Data flows one way: the controller hands owners being deleted with a GC finalizer to the
	// processor, which reads the controller's graph; both write through package internal/client.
	objects := client.New(metaClient)
	var wg sync.WaitGroup
	if opts.DryRun {
		dry := client.NewDryRun(objects, reg)
		objects = dry
		logger.Info("Dry run: deciding everything, writing nothing", "divergenceAfter", opts.DryRunDivergenceAfter)
		wg.Go(func() {
			dry.CheckDivergence(ctx, max(opts.DryRunDivergenceAfter/10, time.Second), opts.DryRunDivergenceAfter)
		})
	}
	// The orphan record: written before an orphan finalizer is removed, loaded once elected.
	// A dry run reads it (the graph knows what the leader recorded) and writes nothing.
	var records *orphanrecord.Store
	if opts.OrphanRecordConfigMap != "" {
		ns, name, _ := watch.ParseName(opts.OrphanRecordConfigMap) // validated with the flags
		records = orphanrecord.New(orphanrecord.Options{
			ConfigMaps: kube.CoreV1().ConfigMaps(ns),
			Name:       name,
			TTL:        opts.OrphanRecordTTL,
			Metrics:    ms.orphanRecord,
		})
	} else {
		logger.Info("No orphan record (--orphan-record-configmap is empty): after a restart or failover, a dependent created just before its owner's orphan deletion may be collected")
	}
	var finRecords finalizers.Recorder
	if records != nil && !opts.DryRun {
		finRecords = records
	}
	fin := finalizers.New(finalizers.Options{
		Records:      finRecords,
		RecordWindow: opts.OrphanRecordTTL,
		Client:       objects,
		ResyncPeriod: opts.FinalizerResyncPeriod,
		PatchWorkers: opts.Workers,
		Metrics:      ms.finalizers,
		WorkMetrics:  workMetrics,
		Recorder:     recorder,
		StuckAfter:   opts.StuckAfter,
	})
	elected := make(chan struct{})
	inForce, authoritative, err := startPolicy(ctx, opts, kube, disco, recorder, elected, ms.policy) // policy.go
	if err != nil {
		return err
	}
	if inForce == nil {
		builtin := policy.Builtin()
		inForce = func() *policy.Compiled { return builtin }
	}
	ctrl := gc.New(gc.Deps{
		Policy:                 inForce,
		Elected:                elected,
		Discovery:              disco,
		Metadata:               metaClient,
		Dynamic:                dyn,
		Client:                 objects,
		Mapper:                 restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)),
		Recorder:               recorder,
		Metrics:                ms.gc,
		WorkMetrics:            workMetrics,
		Ignored:                opts.IgnoredGroupResources(),
		DiscoveryPeriod:        opts.DiscoveryPeriod,
		SyncTimeout:            opts.SyncTimeout,
		OwnerReverifyPeriod:    opts.OwnerReverifyPeriod,
		Workers:                opts.Workers,
		AbsentCacheSize:        opts.AbsentOwnerCacheSize,
		ForegroundResyncPeriod: opts.FinalizerResyncPeriod,
		Finalizers:             fin,
		OrphanRecords:          orphanRecordsOrNil(records),
	})

	// The policy's defaultPropagation rules: admission objects and the stamping pass (leader only).
	stamper := stamp.New(stamp.Options{
		Client:        objects,
		Admission:     kube.AdmissionregistrationV1(),
		Policy:        inForce,
		Authoritative: authoritative,
		Rate:          opts.DefaultPropagationRate,
		DryRun:        opts.DryRun,
		Metrics:       ms.defaults,
		WorkMetrics:   workMetrics,
	})

	servers, err := startServers(ctx, &wg, opts, reg, ctrl, ctrl.DebugGraph)
	if err != nil {
		return err
	}
	logger.Info("cascade started", "server", cfg.Host, "workers", opts.Workers, "qps", opts.QPS, "burst", opts.Burst)
	if opts.LeaderElect {
		le, err := newLeaderElector(ctx, opts, kube, elected, cancel)
		if err != nil {
			return err
		}
		wg.Go(func() { le.Run(ctx) })
	} else {
		close(elected)
	}
	// Either part failing to start stops the other: finErr is read after wg.Wait.
	finCtx, stopFin := context.WithCancel(ctx)
	var finErr error
	wg.Go(func() {
		select {
		case <-elected:
			if finErr = fin.Run(finCtx, ctrl, opts.Workers); finErr != nil {
				cancel(finErr)
			}
		case <-finCtx.Done():
		}
	})
	wg.Go(func() {
		select {
		case <-elected:
			_ = stamper.Run(finCtx, ctrl, 2) // returns when finCtx ends
		case <-finCtx.Done():
		}
	})
	if records != nil && !opts.DryRun {
		wg.Go(func() {
			select {
			case <-elected:
				records.Run(finCtx, ctrl.Ready) // prunes old entries
			case <-finCtx.Done():
			}
		})
	}
	runErr := ctrl.Run(ctx)
	stopFin()
	if cause := context.Cause(ctx); runErr == nil && errors.Is(cause, errLostLease) {
		runErr = cause
	}

	logger.Info("Shutting down")
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelShutdown()
	for _, s := range servers {
		_ = s.Shutdown(shutdownCtx)
	}
	wg.Wait()
	return errors.Join(runErr, finErr)
}

// orphanRecordsOrNil keeps a nil store a nil interface.
func orphanRecordsOrNil(s *orphanrecord.Store) gc.OrphanRecords {
	if s == nil {
		return nil
	}
	return s
}

var errLostLease = errors.New("lost the leader-election Lease; exiting so that a restart rejoins as a standby")

// newLeaderElector takes the Lease --leader-elect-resource-namespace/name; elected is closed
// when this replica leads, and losing the Lease cancels ctx with errLostLease.
func newLeaderElector(ctx context.Context, opts *Options, kube kubernetes.Interface, elected chan struct{}, cancel context.CancelCauseFunc) (*leaderelection.LeaderElector, error) {
	host, _ := os.Hostname()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	id := fmt.Sprintf("%s_%x", host, suffix)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: opts.LeaderElectResourceNamespace, Name: opts.LeaderElectResourceName},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	logger := klog.FromContext(ctx)
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            opts.LeaderElectResourceName,
		LeaseDuration:   opts.LeaseDuration,
		RenewDeadline:   opts.RenewDeadline,
		RetryPeriod:     opts.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				logger.Info("Leading", "lease", opts.LeaderElectResourceNamespace+"/"+opts.LeaderElectResourceName, "identity", id)
				close(elected)
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					logger.Error(errLostLease, "Leadership lost")
					cancel(errLostLease)
				}
			},
			OnNewLeader: func(leader string) {
				if leader != id {
					logger.Info("Standing by", "leader", leader)
				}
			},
		},
	})
}

// restConfig loads --kubeconfig, or the in-cluster config when none is given.
func restConfig(opts *Options) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if opts.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("cannot load --kubeconfig=%s: %v", opts.Kubeconfig, err)
		}
	} else {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig given and no in-cluster config (%v): pass --kubeconfig=PATH", err)
		}
	}
	cfg.UserAgent = userAgent
	if opts.QPS == 0 {
		cfg.QPS = -1 // client-go: negative disables the client-side rate limiter
	} else {
		cfg.QPS = opts.QPS
		cfg.Burst = opts.Burst
	}
	return cfg, nil
}

// waitForServer retries the server's /version until it answers or timeout passes.
func waitForServer(ctx context.Context, disco discovery.ServerVersionInterface, host string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		_, last = disco.ServerVersion()
		return last == nil, nil
	})
	if err != nil {
		if last == nil {
			last = err
		}
		return fmt.Errorf("cannot reach the API server at %s within --startup-timeout=%s: %v; check --kubeconfig and that the server is running", host, timeout, last)
	}
	return nil
}

// startServers serves /metrics and /healthz,/readyz on their own ports (either may be disabled
// with "0"). Listening happens here, so a taken port is an error before work starts.
func startServers(ctx context.Context, wg *sync.WaitGroup, opts *Options, reg *prometheus.Registry, ready readiness, debugGraph http.HandlerFunc) ([]*http.Server, error) {
	logger := klog.FromContext(ctx)
	var servers []*http.Server
	serve := func(flagName, addr string, h http.Handler) error {
		if addr == "0" {
			return nil
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("cannot listen on %s=%s: %v", flagName, addr, err)
		}
		s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, s)
		logger.Info("Serving", "flag", flagName, "address", l.Addr().String())
		wg.Go(func() {
			if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "Server failed", "flag", flagName)
			}
		})
		return nil
	}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	metricsMux.HandleFunc("/debug/graph", debugGraph)
	if opts.EnableProfiling {
		metricsMux.HandleFunc("/debug/pprof/", pprof.Index)
		metricsMux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		metricsMux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		metricsMux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	healthMux := http.NewServeMux()
	healthMux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	healthMux.HandleFunc("/readyz", readyz(ready))
	if err := serve("--metrics-bind-address", opts.MetricsBindAddress, metricsMux); err != nil {
		return servers, err
	}
	if err := serve("--health-probe-bind-address", opts.HealthProbeBindAddress, healthMux); err != nil {
		for _, s := range servers {
			_ = s.Close()
		}
		return nil, err
	}
	return servers, nil
}

// readiness is what /readyz reports on (gc.Controller).
type readiness interface {
	Ready() bool
	Unsynced() []gc.Unsynced
}

// readyz answers 503 until the graph counts as synced (every initial list in, or
// --sync-timeout passed), then 200. Either way it names the resources whose view is
// incomplete, with their last error.
func readyz(r readiness) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		var names []string
		for _, u := range r.Unsynced() {
			name := gc.GVRString(u.Resource.GVR)
			if u.Err != "" {
				name += " (" + u.Err + ")"
			}
			names = append(names, name)
		}
		if !r.Ready() {
			msg := "not ready: the dependency graph has not synced"
			if len(names) > 0 {
				msg += "; waiting for: " + strings.Join(names, "; ")
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		if len(names) > 0 {
			_, _ = fmt.Fprintf(w, "ok; unsynced resources (decisions that need them wait): %s\n", strings.Join(names, "; "))
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
}

// countRequests wraps the client transport to count every request by verb and status code.
func countRequests(c *prometheus.CounterVec) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			code := "error"
			if err == nil {
				code = strconv.Itoa(resp.StatusCode)
			}
			c.WithLabelValues(req.Method, code).Inc()
			return resp, err
		})
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
