package clientset_test

import (
	"nodehealth.io/heartbeat"
	"nodehealth.io/heartbeat/clientset"
)

// The adapter is a heartbeat.Client; the renewer's tests exercise it against
// a fake clientset, test/integration/heartbeat against the API server.
var _ heartbeat.Client = (*clientset.Client)(nil)
