package main

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jetledger/jetledger/ledger"
)

// printStatus writes the status report as text, one labelled field a line.
func printStatus(w io.Writer, r statusReport) {
	if s := r.Serves; s != nil {
		text := fmt.Sprintf("stream %s, durable %s", s.Stream, s.Durable)
		if s.origin != "" {
			text += " (" + s.origin + ")"
		}
		field(w, "serves", text)
	}
	if s := r.Stream; s != nil {
		field(w, "stream", fmt.Sprintf("%s: seq %d..%d, %d messages, duplicate window %s", s.Name, s.FirstSeq, s.LastSeq, s.Messages, s.DuplicateWindow))
	}
	if c := r.Consumer; c != nil {
		safe := "ok"
		if !c.Safe {
			safe = "UNSAFE"
		}
		field(w, "consumer", fmt.Sprintf("%s: AckWait %s (plan needs %s: %s)", c.Name, c.AckWait, c.PlanAckWait, safe))
		field(w, "", fmt.Sprintf("%d pending, %d waiting for ack, %d redelivered, acked through seq %d", c.Pending, c.AckPending, c.Redelivered, c.AckFloorSeq))
	}
	if l := r.Ledger; l != nil {
		oldest := "-"
		if l.Processed > 0 {
			oldest = l.Oldest.Format(time.RFC3339)
		}
		where := l.Path
		if len(r.Partitions) > 0 && where == "" {
			where = fmt.Sprintf("the ledgers of %d partitions here", ledgersHere(r.Partitions))
		}
		field(w, "ledger", fmt.Sprintf("%s: %d rows, %d bytes, oldest %s", where, l.Processed, l.SizeBytes, oldest))
		field(w, "dead letters", fmt.Sprint(l.DeadLetters))
		field(w, "conflicts", fmt.Sprint(l.Conflicts))
	}
	printPartitions(w, r.Partitions)
	if r.Outbox != nil {
		counts := make([]string, len(ledger.Statuses))
		for i, s := range ledger.Statuses {
			counts[i] = fmt.Sprintf("%s %d,", s, r.Outbox[s])
		}
		field(w, "outbox", strings.TrimSuffix(strings.Join(counts, " "), ","))
	}
	for _, p := range r.Problems {
		field(w, "PROBLEM", p)
	}
}

// Status fits a screen of statusWidth columns: a label, then its value
// wrapped at spaces, each line continued under the value.
const (
	statusLabel = len("dead letters  ")
	statusWidth = 100
)

// field writes one labelled value of status.
func field(w io.Writer, label, text string) {
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s", statusLabel, label)
	n := statusLabel
	for i, word := range strings.Fields(text) {
		size := utf8.RuneCountInString(word)
		switch {
		case i > 0 && n+1+size > statusWidth:
			fmt.Fprintf(&b, "\n%*s", statusLabel, "")
			n = statusLabel
		case i > 0:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += size
	}
	fmt.Fprintln(w, b.String())
}

func printPartitions(w io.Writer, ps []partitionStatus) {
	for _, p := range ps {
		owner := "no ledger on this host"
		if p.Ledger != "" {
			owner = fmt.Sprintf("ledger %s, %d rows, %d dead letters, %d conflicts", p.Ledger, p.LedgerRows, p.DeadLetters, p.Conflicts)
			for _, st := range ledger.Statuses {
				if n := p.Outbox[st]; n > 0 {
					owner += fmt.Sprintf(", outbox %s %d", st, n)
				}
			}
		}
		durable := fmt.Sprintf("%s: %d pending, %d waiting for ack, acked through seq %d", p.Durable, p.Pending, p.AckPending, p.AckFloorSeq)
		switch {
		case p.Durable == "":
			durable = "durable not read"
		case !p.Consumer:
			durable = p.Durable + ": no such durable yet"
		case p.Waiting > 0:
			durable += ", being consumed"
		case !p.LastDelivered.IsZero():
			durable += ", last delivery " + p.LastDelivered.Format(time.RFC3339)
		}
		field(w, fmt.Sprintf("partition %d", p.Partition), durable+"; "+owner)
	}
}

// ledgersHere is how many partitions have their ledger on this host.
func ledgersHere(ps []partitionStatus) int {
	n := 0
	for _, p := range ps {
		if p.Ledger != "" {
			n++
		}
	}
	return n
}
