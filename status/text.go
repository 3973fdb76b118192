package status

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jetledger/jetledger/ledger"
)

// TextWidth is the columns every line of WriteText and WriteField fits
// in: a label, then its value wrapped at spaces, each line continued under
// the value. A word longer than a line is not cut.
const TextWidth = 100

// textLabel is the width of a label, the longest with a space after it.
const textLabel = len("dead letters  ")

// WriteText writes r's parts as `jetledger status` shows them, one
// labelled field a line: the stream, the consumer against the plan, the
// ledger with its dead letters and conflicts, every partition, the outbox
// per state. Parts not read are left out, and so are the problems: the
// caller says them in its own terms, with WriteField.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if s := r.Stream; s != nil {
		writeField(&b, "stream", fmt.Sprintf("%s: seq %d..%d, %d messages, duplicate window %s", s.Name, s.FirstSeq, s.LastSeq, s.Messages, s.DuplicateWindow))
	}
	if h := r.Hub; h != nil {
		writeField(&b, "hub", h.Line())
	}
	if c := r.Consumer; c != nil {
		safe := "ok"
		if !c.Safe {
			safe = "UNSAFE"
		}
		writeField(&b, "consumer", fmt.Sprintf("%s: AckWait %s (plan needs %s: %s)", c.Name, c.AckWait, c.PlanAckWait, safe))
		writeField(&b, "", fmt.Sprintf("%d pending, %d waiting for ack, %d redelivered, acked through seq %d", c.Pending, c.AckPending, c.Redelivered, c.AckFloorSeq))
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
		writeField(&b, "ledger", fmt.Sprintf("%s: %d rows, %d bytes, oldest %s", where, l.Processed, l.SizeBytes, oldest))
		writeField(&b, "dead letters", fmt.Sprint(l.DeadLetters))
		writeField(&b, "conflicts", fmt.Sprint(l.Conflicts))
	}
	for _, p := range r.Partitions {
		writeField(&b, fmt.Sprintf("partition %d", p.Partition), p.text())
	}
	if r.Outbox != nil {
		counts := make([]string, len(ledger.Statuses))
		for i, s := range ledger.Statuses {
			counts[i] = fmt.Sprintf("%s %d,", s, r.Outbox[s])
		}
		writeField(&b, "outbox", strings.TrimSuffix(strings.Join(counts, " "), ","))
	}
	for _, n := range r.Attention {
		writeField(&b, "ATTENTION", n.Text(time.Now()))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// text is the partition's durable, then its ledger, as WriteText says them.
func (p Partition) text() string {
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
	return durable + "; " + owner
}

// ledgersHere is how many partitions have their ledger on this host.
func ledgersHere(ps []Partition) int {
	n := 0
	for _, p := range ps {
		if p.Ledger != "" {
			n++
		}
	}
	return n
}

// WriteField writes one labelled field as WriteText does: the label
// padded, then text wrapped at spaces to fit TextWidth.
func WriteField(w io.Writer, label, text string) error {
	var b strings.Builder
	writeField(&b, label, text)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeField(b *strings.Builder, label, text string) {
	fmt.Fprintf(b, "%-*s", textLabel, label)
	n := textLabel
	for i, word := range strings.Fields(text) {
		size := utf8.RuneCountInString(word)
		switch {
		case i > 0 && n+1+size > TextWidth:
			fmt.Fprintf(b, "\n%*s", textLabel, "")
			n = textLabel
		case i > 0:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += size
	}
	b.WriteByte('\n')
}
