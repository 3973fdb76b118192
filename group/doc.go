// Package group spreads a partitioned stream's partitions over the hosts
// that run the same command: each host joins the group (Join), writes a
// heartbeat to its key in the KV bucket Bucket, and watches the others'
// and the group's assignment. One member, the first present by id,
// coordinates: when the members change it writes a new assignment (Assign:
// each partition one owner and Standbys standbys on other members, spread
// evenly, moving as little as it can) after the revision it read, so two
// coordinators never both write. A member is assigned partitions only
// once it has been a member for StableAfter (a host that flaps moves
// nothing); one lost or leaving is taken out at once.
//
//	m, err := group.Join(ctx, js, group.Config{Name: "payments", Partitions: 8, Standbys: 1})
//	if err != nil {
//		return err
//	}
//	defer m.Close()
//	for range m.Changed() {
//		a := m.Assignment()
//		for i := range a.Slots {
//			_ = a.Owner(i) == m.ID() // run partition i as its owner, a.Has: as a standby
//		}
//	}
package group
