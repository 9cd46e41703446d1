// Package kubectlparity owns one test: that the drain's pod filters
// (pkg/drain's SkipDaemonSetAndMirrorPods and SkipUnmanagedAndLocalData)
// decide as kubectl drain does (k8s.io/kubectl/pkg/drain), pod by pod, for
// every combination of force and deleteEmptyDirData, and say why where they
// deliberately do not. It is a package of its own so that k8s.io/kubectl, a
// test-only dependency with a large dependency tree, is compiled once, not
// again for the race detector's run of pkg/drain (Makefile, RACE_PKGS).
package kubectlparity
