package group

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jetledger/jetledger/changelog"
	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/nats-io/nats.go/jetstream"
)

// Status is a group of hosts as `jetledger group status` and the console
// show it: its members, and each partition's assigned owner against the
// member whose lease it is now.
type Status struct {
	Group      string         `json:"group"`
	Stream     string         `json:"stream"`
	Durable    string         `json:"durable"`
	Partitions int            `json:"partitions"`
	Standbys   int            `json:"standbys"`
	Epoch      uint64         `json:"epoch"` // assignments written so far
	Members    []MemberStatus `json:"members"`
	Slots      []SlotStatus   `json:"slots"`
}

// MemberStatus is a member present now (its key not expired).
type MemberStatus struct {
	Member   string        `json:"member"`
	Up       time.Duration `json:"up"` // a member for this long, by its heartbeats
	Leaving  bool          `json:"leaving,omitempty"`
	Assigned bool          `json:"assigned"` // the assignment counts it (stable, not leaving)
	Parts    map[int]Part  `json:"parts,omitempty"`
}

// Partition states of SlotStatus.State.
const (
	SlotOwned   = "owned"   // its lease is its assigned owner's
	SlotMoving  = "moving"  // its lease is another member's: a hand-over under way
	SlotUnowned = "unowned" // nobody holds its lease: nothing consumes it (attention)
	SlotOutside = "outside" // a run that is no member holds its lease (a static --partition run): the group cannot own it (attention)
)

// SlotStatus is one partition: who is assigned, who holds it.
type SlotStatus struct {
	Partition int      `json:"partition"`
	State     string   `json:"state"`
	Owner     string   `json:"owner"`  // the assignment's, "" for none
	Holder    string   `json:"holder"` // the member holding its lease, "" for none
	Standbys  []string `json:"standbys"`
}

// ReadStatus reads group name's members and assignment, and the lease of
// each partition of its stream's durable (partition.Durable), reading
// only. The stream and durable are the members' (their records say
// them); stream and durable, when not "", are taken instead.
func ReadStatus(ctx context.Context, js jetstream.JetStream, name, stream, durable string) (Status, error) {
	a, recs, err := Read(ctx, js, name)
	if err != nil {
		return Status{}, err
	}
	st := Status{Group: name, Stream: stream, Durable: durable, Partitions: a.Partitions, Standbys: a.Standbys, Epoch: a.Epoch}
	names := map[string]string{}
	for id, rec := range recs {
		names[id] = rec.Member
		st.Partitions = max(st.Partitions, rec.Partitions)
		st.Stream, st.Durable = cmp.Or(st.Stream, rec.Stream), cmp.Or(st.Durable, rec.Durable)
		st.Members = append(st.Members, MemberStatus{Member: rec.Member, Up: rec.Up,
			Leaving: rec.Leaving, Assigned: slices.Contains(a.Members, id), Parts: rec.Parts})
	}
	slices.SortFunc(st.Members, func(x, y MemberStatus) int { return strings.Compare(x.Member, y.Member) })
	for i := range st.Partitions {
		holder := ""
		if st.Stream != "" {
			if holder, err = changelog.ReadHolder(ctx, js, st.Stream, partition.Durable(cmp.Or(st.Durable, "jetledger"), i)); err != nil {
				return Status{}, err
			}
		}
		slot := SlotStatus{Partition: i, Owner: a.Owner(i), Holder: strings.SplitN(holder, "/", 2)[0]}
		if n, ok := names[slot.Owner]; ok {
			slot.Owner = n
		}
		if i < len(a.Slots) {
			for _, s := range a.Slots[i].Standbys {
				slot.Standbys = append(slot.Standbys, cmpName(names, s))
			}
		}
		switch {
		case slot.Holder == "":
			slot.State = SlotUnowned
		case !slices.ContainsFunc(st.Members, func(m MemberStatus) bool { return m.Member == slot.Holder }):
			slot.State = SlotOutside
		case slot.Holder != slot.Owner:
			slot.State = SlotMoving
		default:
			slot.State = SlotOwned
		}
		st.Slots = append(st.Slots, slot)
	}
	return st, nil
}

func cmpName(names map[string]string, id string) string {
	if n, ok := names[id]; ok {
		return n
	}
	return id
}

// Attention is an error naming what needs a person: a group without
// members, partitions nobody holds. Nil when nothing does.
func (s Status) Attention() error {
	var unowned, outside []string
	for _, sl := range s.Slots {
		switch sl.State {
		case SlotUnowned:
			unowned = append(unowned, strconv.Itoa(sl.Partition))
		case SlotOutside:
			outside = append(outside, fmt.Sprintf("%d (%s)", sl.Partition, sl.Holder))
		}
	}
	switch {
	case len(s.Members) == 0:
		return fmt.Errorf("group %s has no member: nothing runs its partitions", s.Group)
	case len(unowned) > 0:
		return fmt.Errorf("group %s: partition %s of %d has no owner: nothing consumes it", s.Group, strings.Join(unowned, ", "), s.Partitions)
	case len(outside) > 0:
		return fmt.Errorf("group %s: partition %s held by a run outside the group (a static --partition run?): the group's owner cannot take it while that run holds it; stop that run", s.Group, strings.Join(outside, ", "))
	}
	return nil
}

// WriteTable writes s as two tables: members, then partitions.
func (s Status) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "group %s on %s (durable %s): %d members, %d partitions, %d standbys each, assignment %d\n\n",
		s.Group, orNone(s.Stream), orNone(s.Durable), len(s.Members), s.Partitions, s.Standbys, s.Epoch)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tUP\tASSIGNED\tRUNS")
	for _, m := range s.Members {
		assigned := strconv.FormatBool(m.Assigned)
		if m.Leaving {
			assigned = "leaving"
		}
		var runs []string
		for _, i := range slices.Sorted(maps.Keys(m.Parts)) {
			p := m.Parts[i]
			runs = append(runs, fmt.Sprintf("%d:%s(lag %d)", i, p.Role, p.Lag))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Member, m.Up.Round(time.Second), assigned, strings.Join(runs, " "))
	}
	fmt.Fprintln(tw, "\nPARTITION\tSTATE\tOWNER\tHOLDER\tSTANDBYS")
	for _, sl := range s.Slots {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", sl.Partition, sl.State, orNone(sl.Owner), orNone(sl.Holder), strings.Join(sl.Standbys, ","))
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Groups are the names of the groups in the bucket (none: no bucket).
func Groups(ctx context.Context, js jetstream.JetStream) ([]string, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("group: bucket %s: %w", Bucket, err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("group: list the groups: %w", err)
	}
	var names []string
	for k := range keys.Keys() {
		if name, _, ok := strings.Cut(k, "."); ok && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}
