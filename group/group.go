package group

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jetledger/jetledger/natsconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is the KV bucket of every group's members and assignment: keys
// <group>.m.<member> (each with its own TTL, renewed by the member's
// heartbeats) and <group>.assignment.
const Bucket = "JETLEDGER_GROUPS"

// Defaults of Config.
const (
	HeartbeatDefault   = time.Second
	MemberTTLDefault   = 5 * time.Second
	StableAfterDefault = 10 * time.Second
)

// Config is a member's view of its group. Zero values are defaults.
type Config struct {
	// Name names the group: letters, digits, '-' and '_'. Hosts of one
	// group share its partitions; two groups on one cluster never see
	// each other's members. Required.
	Name string
	// Partitions is how many partitions the group spreads, and Standbys
	// how many standbys each has on other members (fewer while the group
	// has too few members). Every member must say the same: a member that
	// does not is left out of the assignment. Partitions is required.
	Partitions, Standbys int
	// Stream and Durable are what the members consume (partition I on
	// <Durable>-p<I>), said in their records for `group status`. Optional.
	Stream, Durable string
	// Member names this run in the group, and is the first part of the
	// name its partitions' leases carry. Default host:pid:tag.
	Member string
	// Heartbeat is how often the member writes its key. Default 1s.
	Heartbeat time.Duration
	// MemberTTL is how long a member is a member after its last
	// heartbeat: a host lost leaves the group this long after. At least 3
	// heartbeats. Default 5s.
	MemberTTL time.Duration
	// StableAfter damps flapping: a member is given partitions only once
	// it has been a member this long without a break (a host that comes
	// and goes more often than this never moves a partition). A member
	// lost or leaving is taken out at once. At least MemberTTL. Default 10s.
	StableAfter time.Duration
	// Files, asked at each heartbeat, are the partitions whose ledger file
	// this member holds, said in its record: a partition whose assigned
	// copies all wait (a log purged past them, say) is given to a member
	// holding a file of it, whose copy may go on. Optional.
	Files func() []int
	// Replicas of the bucket when this member makes it. Default 1.
	Replicas int
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

var groupName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Validate refuses a Config out of range (ErrInvalidConfig), as Join does.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

func (c Config) withDefaults() (Config, error) {
	c.Heartbeat = cmp.Or(c.Heartbeat, HeartbeatDefault)
	c.MemberTTL = cmp.Or(c.MemberTTL, MemberTTLDefault)
	c.StableAfter = cmp.Or(c.StableAfter, StableAfterDefault)
	c.Replicas = max(c.Replicas, 1)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Member == "" {
		host, _ := os.Hostname()
		c.Member = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), randomTag())
	}
	switch {
	case !groupName.MatchString(c.Name):
		return c, fmt.Errorf("%w: group name %q: use letters, digits, '-' and '_'", ErrInvalidConfig, c.Name)
	case c.Partitions < 1 || c.Standbys < 0:
		return c, fmt.Errorf("%w: group %s: %d partitions and %d standbys each: need 1 partition or more and 0 standbys or more", ErrInvalidConfig, c.Name, c.Partitions, c.Standbys)
	case c.MemberTTL < 3*c.Heartbeat:
		return c, fmt.Errorf("%w: group %s: a member TTL of %v is under 3 heartbeats of %v", ErrInvalidConfig, c.Name, c.MemberTTL, c.Heartbeat)
	case c.StableAfter < c.MemberTTL:
		return c, fmt.Errorf("%w: group %s: stable after %v is under the member TTL of %v", ErrInvalidConfig, c.Name, c.StableAfter, c.MemberTTL)
	}
	return c, nil
}

// Part is what a member says of one partition it runs: its role in the
// partition's lifecycle (changelog.Role's words) and its copy's lag.
type Part struct {
	Role string `json:"role"`
	Lag  uint64 `json:"lag,omitempty"`
}

// Record is a member's key, written at each heartbeat.
type Record struct {
	Member string `json:"member"`
	// Beat counts its heartbeats since it joined, and Heartbeat is their
	// interval. Up is how long it has been a member without a break, by
	// its own monotonic clock: what the damping counts (beats bunch up
	// after a pause, when a ticker's missed tick fires at once).
	Beat       uint64        `json:"beat"`
	Heartbeat  time.Duration `json:"heartbeat"`
	Up         time.Duration `json:"up"`
	Partitions int           `json:"partitions"`
	Standbys   int           `json:"standbys"`
	Stream     string        `json:"stream,omitempty"`
	Durable    string        `json:"durable,omitempty"`
	// Leaving: stopping, it hands its partitions over first.
	Leaving bool         `json:"leaving,omitempty"`
	Parts   map[int]Part `json:"parts,omitempty"`
	// Files: the partitions whose ledger file it holds (Config.Files).
	Files []int `json:"files,omitempty"`
}

// Assignment is the group's agreed spread of its partitions, written by
// one member (the coordinator: the first, by id, of the members present)
// after the revision it read, so two never both write one.
type Assignment struct {
	Partitions int      `json:"partitions"`
	Standbys   int      `json:"standbys"`
	Members    []string `json:"members"` // the ids it was made for
	Slots      []Slot   `json:"slots"`
	Epoch      uint64   `json:"epoch"` // assignments written before it
	By         string   `json:"by"`
	Revision   uint64   `json:"-"` // its revision in the bucket; 0: none yet
}

// Owner is partition i's owner ("" when it has none).
func (a Assignment) Owner(i int) string {
	if i < 0 || i >= len(a.Slots) {
		return ""
	}
	return a.Slots[i].Owner
}

// Has says whether member (an id) owns or stands by partition i.
func (a Assignment) Has(member string, i int) bool {
	return a.Owner(i) == member || i < len(a.Slots) && slices.Contains(a.Slots[i].Standbys, member)
}

// ID is a member name as a key token (a KV key takes no ':').
func ID(member string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, member)
}

func memberKey(group, id string) string { return group + ".m." + id }
func assignmentKey(group string) string { return group + ".assignment" }

// ensureBucket opens the bucket, making it if it is missing, with per-key
// TTLs and markers for keys that expire (a watcher sees a member go).
func ensureBucket(ctx context.Context, js jetstream.JetStream, replicas int, ttl time.Duration) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: Bucket, History: 1, Replicas: replicas,
			LimitMarkerTTL: max(natsconn.KeyTTL(ttl), time.Second), Description: "jetledger: the groups' members and assignments"})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("group: bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// decodeAssignment reads an assignment entry.
func decodeAssignment(e jetstream.KeyValueEntry) (Assignment, error) {
	var a Assignment
	if err := json.Unmarshal(e.Value(), &a); err != nil {
		return Assignment{}, fmt.Errorf("group: assignment %s: %w", e.Key(), err)
	}
	a.Revision = e.Revision()
	return a, nil
}

// putRecord writes the member's key with its TTL, which KeyValue.Put
// cannot set: published as nats.go's KV would.
func putRecord(ctx context.Context, js jetstream.JetStream, key string, rec Record, ttl time.Duration) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	m := nats.NewMsg(natsconn.APIPrefix(js) + "$KV." + Bucket + "." + key)
	m.Data = b
	_, err = js.PublishMsg(ctx, m, jetstream.WithExpectStream("KV_"+Bucket), jetstream.WithMsgTTL(natsconn.KeyTTL(ttl)))
	return err
}

// Read reads a group's assignment and present members (their keys not
// expired), once, as `group status` shows them. A group never formed
// reads as no members and an assignment of revision 0.
func Read(ctx context.Context, js jetstream.JetStream, name string) (Assignment, map[string]Record, error) {
	members := map[string]Record{}
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return Assignment{}, members, nil
	}
	if err != nil {
		return Assignment{}, nil, fmt.Errorf("group: bucket %s: %w", Bucket, err)
	}
	var a Assignment
	if e, err := kv.Get(ctx, assignmentKey(name)); err == nil {
		if a, err = decodeAssignment(e); err != nil {
			return Assignment{}, nil, err
		}
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return Assignment{}, nil, fmt.Errorf("group %s: read the assignment: %w", name, err)
	}
	keys, err := kv.ListKeysFiltered(ctx, name+".m.>")
	if err != nil {
		return Assignment{}, nil, fmt.Errorf("group %s: list the members: %w", name, err)
	}
	prefix := name + ".m."
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // gone since the listing
		}
		if err != nil {
			return Assignment{}, nil, fmt.Errorf("group %s: read member %s: %w", name, k, err)
		}
		var rec Record
		if err := json.Unmarshal(e.Value(), &rec); err == nil {
			members[strings.TrimPrefix(k, prefix)] = rec
		}
	}
	return a, members, nil
}
