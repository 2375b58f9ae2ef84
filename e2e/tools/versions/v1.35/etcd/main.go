// Command etcd is etcd's server entry point from go.etcd.io/etcd/server/v3 v3.6.5, the version
// Kubernetes v1.35.4 requires.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
