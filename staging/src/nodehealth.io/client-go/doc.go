// Package clientgo is the root of nodehealth's generated client code.
//
// hack/update-codegen.sh writes the typed clientset, listers, informers and
// apply configurations below this folder (clientset/, listers/, informers/,
// applyconfiguration/) for every API type of nodehealth.io/api marked
// +genclient. Nothing here is written by hand.
package clientgo
