//go:build tools

// Package tools records the commands this module builds, so that `go mod tidy` keeps their
// dependencies. The Makefile builds them with `go build -o ../../bin/<name> <package>`.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
