package nodehealth

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
)

// TransformNode drops what the controller never reads from Nodes before they
// enter the informer cache: managed fields, container images (often the
// largest part of a Node), volume lists and daemon endpoints. The controller
// never writes an object it read from the cache, so nothing is lost on writes.
func TransformNode(obj interface{}) (interface{}, error) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return obj, nil
	}
	node.ManagedFields = nil
	node.Status.Images = nil
	node.Status.VolumesInUse = nil
	node.Status.VolumesAttached = nil
	node.Status.Addresses = nil
	node.Status.Capacity = nil
	node.Status.Allocatable = nil
	node.Status.DaemonEndpoints = v1.NodeDaemonEndpoints{}
	node.Status.Config = nil
	node.Status.RuntimeHandlers = nil
	return node, nil
}

// TransformLease drops managed fields from Leases before they are cached.
func TransformLease(obj interface{}) (interface{}, error) {
	if lease, ok := obj.(*coordinationv1.Lease); ok {
		lease.ManagedFields = nil
	}
	return obj, nil
}
