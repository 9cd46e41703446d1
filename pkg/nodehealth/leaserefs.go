package nodehealth

// This file holds the index from a Lease to the nodes whose lists reference it
// by name.

import (
	"k8s.io/apimachinery/pkg/util/sets"
)

// indexLeaseRefs remembers which Leases a node references under a
// non-default name, replacing what it referenced before. Callers hold c.mu.
func (c *Controller) indexLeaseRefs(node string, exts []requiredExtension) {
	c.dropLeaseRefs(node)
	var keys []string
	for _, e := range exts {
		if e.lease.Name == e.name+"."+node {
			continue
		}
		key := e.lease.String()
		if c.leaseRefs[key] == nil {
			c.leaseRefs[key] = sets.New[string]()
		}
		c.leaseRefs[key].Insert(node)
		keys = append(keys, key)
	}
	if len(keys) > 0 {
		c.nodeLeaseRefs[node] = keys
	}
}

// dropLeaseRefs forgets the Leases a node referenced. Callers hold c.mu.
func (c *Controller) dropLeaseRefs(node string) {
	for _, key := range c.nodeLeaseRefs[node] {
		if nodes := c.leaseRefs[key]; nodes != nil {
			nodes.Delete(node)
			if nodes.Len() == 0 {
				delete(c.leaseRefs, key)
			}
		}
	}
	delete(c.nodeLeaseRefs, node)
}
