package nodehealth

import (
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
)

// registerHandlers subscribes the controller to its informers. Run waits for
// the handlers' registrations, not only the informers' stores: a node must
// not be evaluated before every Lease of the initial list reached the
// tracker, or a start would see Leases as missing and then as renewed after
// the node's gateStart (a flap).
func (c *Controller) registerHandlers(nodeInformer coreinformers.NodeInformer, leaseInformer LeaseInformer) error {
	if err := leaseInformer.AddIndexers(cache.Indexers{leaseNodeIndex: indexLeaseByNode}); err != nil {
		return fmt.Errorf("adding the lease index: %w", err)
	}
	nodeHandler, err := nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: c.addNode, UpdateFunc: c.updateNode, DeleteFunc: c.deleteNode,
	})
	if err != nil {
		return err
	}
	leaseHandler, err := leaseInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.addLease, UpdateFunc: c.updateLease, DeleteFunc: c.deleteLease,
	})
	if err != nil {
		return err
	}
	c.nodeLister = nodeInformer.Lister()
	c.nodesSynced = nodeHandler.HasSynced
	c.leaseLister = coordinationlisters.NewLeaseLister(leaseInformer.GetIndexer())
	c.leaseIndexer = leaseInformer.GetIndexer()
	c.leasesSynced = leaseHandler.HasSynced
	return nil
}

// Every handler counts itself in handled when it is done: a shared informer
// runs each handler on a goroutine of its own, and the simulation must know
// that they all ran before it lets the workers look.

func (c *Controller) addNode(obj interface{}, initial bool) {
	defer c.handled.Add(1)
	node, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	if !initial {
		// Added after the initial list: the node is new, not only new to
		// this controller.
		c.mu.Lock()
		c.live.Insert(node.Name)
		c.mu.Unlock()
	}
	c.enqueue(node.Name)
}

func (c *Controller) updateNode(oldObj, newObj interface{}) {
	defer c.handled.Add(1)
	oldNode, ok1 := oldObj.(*v1.Node)
	newNode, ok2 := newObj.(*v1.Node)
	// Equal resourceVersions are a resync: every node is looked at again.
	if ok1 && ok2 && (nodeChanged(oldNode, newNode, &c.opts) || oldNode.ResourceVersion == newNode.ResourceVersion) {
		c.enqueue(newNode.Name)
	}
}

func (c *Controller) deleteNode(obj interface{}) {
	defer c.handled.Add(1)
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if node, ok := obj.(*v1.Node); ok {
		c.enqueue(node.Name)
	}
}

func (c *Controller) addLease(obj interface{}) {
	defer c.handled.Add(1)
	c.leaseChanged(nil, obj)
}

func (c *Controller) updateLease(oldObj, newObj interface{}) {
	defer c.handled.Add(1)
	c.leaseChanged(oldObj, newObj)
}

func (c *Controller) deleteLease(obj interface{}) {
	defer c.handled.Add(1)
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	c.tracker.forget(lease.Namespace, lease.Name)
	c.enqueueLeaseNodes(lease)
}
