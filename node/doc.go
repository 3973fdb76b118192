// Package node is jetledger's embedded JetStream server: one process is a
// whole edge node, its store the system of record. Start runs nats-server
// in-process, standalone or as a leaf node of a hub (its own JetStream
// domain, so processing never waits on the link), with the store locked
// against a second owner (ErrStoreLocked), every write synced before its
// publish is acked unless SyncInterval says otherwise, and an optional
// memory limit for the whole process.
//
//	n, err := node.Start(ctx, node.Config{
//		StoreDir: "app.db.nats",
//		Listen:   "127.0.0.1:4222",
//		Leaf: &node.LeafConfig{ // omit for a standalone server
//			URLs:   []string{"nats-leaf://hub.example:7422"},
//			Domain: "site1",
//		},
//	})
//	if err != nil { ... } // errors.Is(err, node.ErrStoreLocked): another process owns the store
//	defer n.Close()
//	js, err := n.JetStream()
//	...
//	n.DependOn("ORDERS")
//	err = n.Watch(ctx, 0) // returns an ErrStoreFailed once the store cannot be written: restart
//
// A server that failed to write its store (a full disk) fails every later
// publish until it restarts; Watch and Fault report it, so that the
// program can stop for its supervisor to restart it.
package node
