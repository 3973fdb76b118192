package service

import (
	"errors"
	"fmt"

	"github.com/jetledger/jetledger/consumer/partition"
	"github.com/jetledger/jetledger/group"
	"github.com/nats-io/nats.go/jetstream"
)

// Validate refuses, before any I/O, partitions that RunPartitions of c
// would refuse or cannot run, each named as c.Names says (a *ConfigError);
// c is checked by Config.Validate.
func (p Partitions) Validate(c Config) error {
	c.Names = c.Names.withDefaults()
	n := c.Names
	switch {
	case p.Count < 0:
		return refusef("%s %d: want a positive number", n.Say("Partitions.Count"), p.Count)
	case p.Count == 1:
		return refusef("%s 1 is no partitioning; leave the flag out, or give 2 or more", n.Say("Partitions.Count"))
	case p.Count > 0 && p.creates(c) && len(c.Stream.Subjects) != 1:
		return refusef("%s needs %s with exactly one subject (the stream's partition mapping has one source)", n.Say("Partitions.Count"), n.Say("Stream.Subjects"))
	case p.Count > 0 && (p.Key < 0 || c.Explicit && p.Key == 0):
		return refusef("%s %d: want the position of a '*' token, from 1", n.Say("Partitions.Key"), p.Key)
	}
	if p.Count > 0 && p.creates(c) {
		if _, err := p.transform(c); err != nil {
			return err
		}
	}
	if err := p.validateGroup(c); err != nil {
		return err
	}
	seen := map[int]bool{}
	for _, i := range p.Named {
		switch {
		case i < 0:
			return refusef("%s %d: partitions count from 0", n.Say("Partitions.Named"), i)
		case p.Count > 0 && i >= p.Count:
			return refusef("%s %d: the stream has %s %d, numbered 0 to %d", n.Say("Partitions.Named"), i, n.Say("Partitions.Count"), p.Count, p.Count-1)
		case seen[i]:
			return refusef("%s %d is given twice", n.Say("Partitions.Named"), i)
		}
		seen[i] = true
	}
	switch {
	case (c.Metrics != nil || c.MetricsAddr != "") && len(p.Named) != 1 && p.Group == nil:
		return refusef("%s serves one consumer: with partitions give one %s per process (or leave out %s)",
			n.Say("MetricsAddr"), n.Say("Partitions.Named"), n.Say("MetricsAddr"))
	case c.Hub != nil:
		return refusef("%s/%s and %s do not go together: partition the hub's stream, and give each site its share with %s",
			n.Say("Partitions.Count"), n.Say("Partitions.Named"), n.Say("Hub"), n.Say("Hub.Filter"))
	}
	return nil
}

// validateGroup refuses a Group that cannot run: static placement with
// it, no NATS to share, or a group config out of range.
func (p Partitions) validateGroup(c Config) error {
	n, g := c.Names, p.Group
	switch {
	case g == nil:
		return nil
	case len(p.Named) > 0:
		return refusef("%s and %s do not go together: a group's members share out every partition themselves; leave out %s (or %s, for static placement)",
			n.Say("Partitions.Group"), n.Say("Partitions.Named"), n.Say("Partitions.Named"), n.Say("Partitions.Group"))
	case c.NATS == nil:
		return refusef("%s needs %s: the members of a group share one JetStream (a cluster), each on its own host", n.Say("Partitions.Group"), n.Say("NATS"))
	}
	err := group.Config{Name: g.Name, Partitions: max(p.Count, 1), Standbys: g.Standbys, Heartbeat: g.Heartbeat, MemberTTL: g.MemberTTL, StableAfter: g.StableAfter}.Validate()
	if err != nil {
		return refusef("%s: %v", n.Say("Partitions.Group"), err)
	}
	return nil
}

// creates says the stream is made partitioned by Key when missing.
func (p Partitions) creates(c Config) bool { return p.Key != 0 || c.Explicit }

// transform is the partition mapping of c's one subject into Count by Key
// (partition.Transform), its refusals named as c.Names says.
func (p Partitions) transform(c Config) (*jetstream.SubjectTransformConfig, error) {
	subject := c.Stream.Subjects[0]
	tr, err := partition.Transform(subject, p.Count, p.Key)
	var ke *partition.KeyError
	switch {
	case errors.Is(err, partition.ErrWildcardNotLast):
		return nil, &ConfigError{Reason: fmt.Sprintf("%s %q: '>' must be the last token", c.Names.Say("Stream.Subjects"), subject), Err: err}
	case errors.As(err, &ke):
		return nil, &ConfigError{Reason: fmt.Sprintf("%s %d: %s %q has %d '*' tokens; the key must be one of them, such as orders.*.> with the customer in the '*'",
			c.Names.Say("Partitions.Key"), p.Key, c.Names.Say("Stream.Subjects"), subject, ke.Wildcards), Err: err}
	}
	return tr, err
}
