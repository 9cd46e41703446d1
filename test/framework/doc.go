// Package framework runs a real, local Kubernetes control plane for nodehealth's
// integration tests, e2e tests and the sandbox.
//
// It owns the lifecycle of the processes built by hack/build-controlplane.sh into
// _output/bin: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
// (which simulates the kubelets of the nodes it is told to manage). Everything listens
// on free 127.0.0.1 ports and lives in one temporary directory (PKI, etcd data,
// kubeconfigs, one log file per process).
//
// The package deliberately does not import "testing": the sandbox program reuses it.
// Test-only helpers (the TestMain runner, t.Helper() wrappers) live in the testenv
// sub-package.
//
// No process outlives its Environment. Every child runs in its own process group with
// Pdeathsig=SIGKILL, so it dies with the test binary even when that binary panics, times
// out or is killed; Stop terminates the children in reverse start order, SIGTERM first,
// then SIGKILL.
//
// What is real, and why it matters to nodehealth: RBAC and the Node authorizer,
// NodeRestriction and the other default admission plugins, Validating and Mutating
// AdmissionPolicy (admissionregistration.k8s.io/v1; Mutating from v1.36, so tests
// of it skip by Environment.ServesResource on older releases), service-account token signing
// with pod-bound tokens carrying the node name, garbage collection, PodDisruptionBudget
// status, scheduling, node lifecycle (the not-ready taint) and kubelet-style node
// Leases in kube-node-lease.
package framework
