package main

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeFlags are kubectl's way of reaching a cluster, for the commands a person runs (uninstall,
// explain): --kubeconfig, else $KUBECONFIG, else ~/.kube/config (else the in-cluster service
// account); --context, else the current context; and for commands about one namespace,
// -n/--namespace, else the context's namespace, else "default". The collector keeps its own
// --kubeconfig (Options), which never reads $KUBECONFIG.
type kubeFlags struct {
	kubeconfig, context, namespace string
}

// add registers the flags on fs; -n/--namespace only withNamespace.
func (k *kubeFlags) add(fs *pflag.FlagSet, withNamespace bool) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "Path to the kubeconfig. Empty: $KUBECONFIG, else ~/.kube/config, as kubectl.")
	fs.StringVar(&k.context, "context", "", "The kubeconfig context to use. Empty: the current context.")
	if withNamespace {
		fs.StringVarP(&k.namespace, "namespace", "n", "", "Namespace of the object. Empty: the context's namespace, else default.")
	}
}

func (k *kubeFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: k.context}
	overrides.Context.Namespace = k.namespace
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// restConfig is the client configuration the flags name.
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	cfg, err := k.clientConfig().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cannot load the kubeconfig: %v", err)
	}
	return cfg, nil
}
