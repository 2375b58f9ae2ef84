package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeFlags are kubectl's flags for reaching a cluster, on every command a person runs against
// one (explain, status, uninstall, policy validate): --kubeconfig, else $KUBECONFIG, else
// ~/.kube/config (else the in-cluster service account); --context, --cluster, --user; the
// connection and credential overrides (--server/-s, --token, --as, --as-group, --as-uid,
// --as-user-extra, --client-certificate, --client-key, --certificate-authority,
// --insecure-skip-tls-verify, --tls-server-name, --proxy-url, --username, --password,
// --request-timeout, --disable-compression); and, where a command has a namespace, -n/--namespace.
// The collector keeps its own --kubeconfig (Options), which never reads $KUBECONFIG.
//
// They are k8s.io/cli-runtime's genericclioptions.ConfigFlags, kubectl's own set, bound with
// the client-go functions ConfigFlags is made of (clientcmd.BindOverrideFlags, and
// --as-user-extra parsed as ConfigFlags parses it): importing cli-runtime's package links
// kustomize, printers and the resource builder into the one binary that is also the collector
// (measured on linux/amd64: a 99 MB binary instead of 73 MB, and 79 MB resident at start
// instead of 44 MB). TestKubeFlagsAreKubectls
// checks, against ConfigFlags itself, that the set stays kubectl's: same names, shorthands and
// types (less --cache-dir: discovery here is cached in memory for one command).
type kubeFlags struct {
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
	userExtra  []string
	// set holds the flags alone, to tell whether any was given (policy validate).
	set *pflag.FlagSet
}

// kubeFlagNames is clientcmd's recommended override flags as kubectl has them: -s for
// --server, no --username nor --password (basic authentication, gone from kubectl).
func kubeFlagNames(withNamespace bool) clientcmd.ConfigOverrideFlags {
	names := clientcmd.RecommendedConfigOverrideFlags("")
	names.ClusterOverrideFlags.APIServer.ShortName = "s"
	names.AuthOverrideFlags.Username.LongName, names.AuthOverrideFlags.Password.LongName = "", ""
	if !withNamespace {
		names.ContextOverrideFlags.Namespace.LongName = "" // not registered
	}
	return names
}

// add registers the flags on fs; -n/--namespace only withNamespace.
func (k *kubeFlags) add(fs *pflag.FlagSet, withNamespace bool) {
	k.addNamed(fs, kubeFlagNames(withNamespace))
}

// addNamed registers the flags named and described by names (kubeFlagNames, where a command
// says what one of them means there).
func (k *kubeFlags) addNamed(fs *pflag.FlagSet, names clientcmd.ConfigOverrideFlags) {
	k.set = pflag.NewFlagSet("kubeconfig", pflag.ContinueOnError)
	k.set.StringVar(&k.kubeconfig, clientcmd.RecommendedConfigPathFlag, "", "Path to the kubeconfig file. Empty: $KUBECONFIG, else ~/.kube/config, as kubectl.")
	clientcmd.BindOverrideFlags(&k.overrides, k.set, names)
	k.set.StringArrayVar(&k.userExtra, "as-user-extra", nil, "User extras to impersonate for the operation, KEY=VALUE; repeat it for several values of one key.")
	fs.AddFlagSet(k.set)
}

// given says whether any of the flags was set on the command line.
func (k *kubeFlags) given() bool {
	changed := false
	k.set.VisitAll(func(f *pflag.Flag) { changed = changed || f.Changed })
	return changed
}

// namespaceFlag is -n/--namespace's value ("": not given).
func (k *kubeFlags) namespaceFlag() string { return k.overrides.Context.Namespace }

func (k *kubeFlags) clientConfig() (clientcmd.ClientConfig, error) {
	return k.clientConfigWith(k.overrides)
}

// clientConfigWith is the client configuration of the kubeconfig with overrides (the flags'
// own, or a copy a command changed).
func (k *kubeFlags) clientConfigWith(overrides clientcmd.ConfigOverrides) (clientcmd.ClientConfig, error) {
	if len(k.userExtra) > 0 {
		extra := map[string][]string{}
		for _, kv := range k.userExtra {
			key, value, ok := strings.Cut(kv, "=")
			if !ok || key == "" {
				return nil, &usageError{err: fmt.Errorf("invalid --as-user-extra %q: want KEY=VALUE", kv)}
			}
			extra[key] = append(extra[key], value)
		}
		overrides.AuthInfo.ImpersonateUserExtra = extra
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &overrides), nil
}

// restConfig is the client configuration the flags name.
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	cc, err := k.clientConfig()
	if err != nil {
		return nil, err
	}
	return loadRESTConfig(cc)
}

func loadRESTConfig(cc clientcmd.ClientConfig) (*rest.Config, error) {
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cannot load the kubeconfig: %v", err)
	}
	return cfg, nil
}

// contextNamespace is -n, else the kubeconfig context's namespace, else "default", as kubectl.
func (k *kubeFlags) contextNamespace() (string, error) {
	cc, err := k.clientConfig()
	if err != nil {
		return "", err
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return "", fmt.Errorf("cannot load the kubeconfig: %v", err)
	}
	return ns, nil
}
