// Command etcd is etcd's server entry point from go.etcd.io/etcd/server/v3 v3.7.0, the version
// Kubernetes v1.37.2 requires.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
