package main

import (
	"flag"

	"k8s.io/klog/v2"
)

// goFlagSet exposes klog's flags (-v, --logtostderr...).
func goFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	return fs
}
