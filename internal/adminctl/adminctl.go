// Package adminctl is the command line's side of the admin API (package
// admin): which run's API a command asks (Target, Resolve), and the bulk
// protocol of an action (a dry run's count first, then the rows it saw),
// said in the command's words.
package adminctl

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/jetledger/jetledger/admin"
	"github.com/jetledger/jetledger/ledger"
	"github.com/nats-io/nats.go"
)

// DiscoverWait is how long Resolve gathers the runs' answers.
const DiscoverWait = 2 * time.Second

// Target is which run's API a command asks: the flags given narrow the
// runs that answer to one. Partition < 0 is none.
type Target struct {
	Site, Stream, Durable string
	Partition             int
	Standby               bool
}

// matches says whether f is one t may mean.
func (t Target) matches(f admin.Found) bool {
	durable := t.Durable == "" || f.Durable == t.Durable
	if t.Partition >= 0 { // a partition's durable is <durable>-p<N>
		suffix := fmt.Sprintf("-p%d", t.Partition)
		durable = strings.HasSuffix(f.Durable, suffix) && (t.Durable == "" || f.Durable == strings.TrimSuffix(t.Durable, suffix)+suffix)
	}
	return f.Standby == t.Standby && (t.Site == "" || f.Site == t.Site || t.Site == admin.NoSite && f.Site == "") &&
		(t.Stream == "" || f.Stream == t.Stream) && durable
}

// ErrNotOne: the runs that answer are not exactly one that the target names.
var ErrNotOne = errors.New("not exactly one run's admin API matches")

// discover gathers the runs answering through nc, and those t names
// among them: while none is, it asks again until DiscoverWait is over, as
// the run t names may answer a moment after another (its subscription
// still on its way across the cluster's routes).
func discover(ctx context.Context, nc *nats.Conn, t Target) (found, match []admin.Found, err error) {
	deadline := time.Now().Add(DiscoverWait)
	for {
		found, err = admin.Discover(ctx, nc, time.Until(deadline))
		if err != nil {
			return nil, nil, err
		}
		for _, f := range found {
			if t.matches(f) {
				match = append(match, f)
			}
		}
		if len(match) > 0 || time.Until(deadline) < admin.DiscoverAgain || ctx.Err() != nil {
			return found, match, nil
		}
	}
}

// Resolve finds the one run's API t names among those answering through
// nc (at url, said in errors): none is an error naming what was asked
// and where; several, one listing them and the flags that tell them apart.
func Resolve(ctx context.Context, nc *nats.Conn, url string, t Target) (admin.Address, error) {
	found, match, err := discover(ctx, nc, t)
	if err != nil {
		return admin.Address{}, err
	}
	switch len(match) {
	case 1:
		return match[0].Address, nil
	case 0:
		return admin.Address{}, fmt.Errorf("%w: none of the %d answering through %s is %s: is its run consuming, and its site reachable? ('nats micro ls jetledger' lists those that answer)",
			ErrNotOne, len(found), url, t.describe())
	}
	names := make([]string, len(match))
	for i, f := range match {
		names[i] = describe(f.Address)
	}
	return admin.Address{}, fmt.Errorf("%w: %d answer through %s (%s): give --site, --stream, --partition or --durable to choose",
		ErrNotOne, len(match), url, strings.Join(names, ", "))
}

func (t Target) describe() string {
	var parts []string
	for _, p := range [][2]string{{"site", t.Site}, {"stream", t.Stream}, {"durable", t.Durable}} {
		if p[1] != "" {
			parts = append(parts, p[0]+" "+p[1])
		}
	}
	if t.Partition >= 0 {
		parts = append(parts, fmt.Sprintf("partition %d", t.Partition))
	}
	if t.Standby {
		parts = append(parts, "a standby")
	}
	if len(parts) == 0 {
		return "any run"
	}
	return strings.Join(parts, ", ")
}

// describe says an address as the flags that name it.
func describe(a admin.Address) string {
	s := fmt.Sprintf("--stream %s --durable %s", a.Stream, a.Durable)
	if a.Site != "" {
		s = "--site " + a.Site + " " + s
	}
	return s
}

// Who is who the audit records: $USER@host, or the process's user.
func Who() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); name == "" && err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return cmp.Or(name, "unknown") + "@" + cmp.Or(host, "unknown")
}

// Bulk is an action asked of the command line: its rows by ids, or every
// row in Status last changed before Before (zero: any time); All acts on
// a filter's rows (without it a filter only counts them).
type Bulk struct {
	Endpoint, Verb string // "outbox.resolve", "resolve"
	Act            admin.Act
	All            bool
}

// ErrSkipped: some rows were left as they were (changed since they were
// seen, or in a state the action does not take); the output says which.
var ErrSkipped = errors.New("some rows were skipped")

// Do runs b at addr: the dry run, whose count is said first; then, for
// ids or with All, the action on the rows it saw. out gets the count and
// the outcome (JSON: the dry run's and the action's answers). Rows
// skipped are ErrSkipped, after they are said.
func Do(ctx context.Context, nc *nats.Conn, addr admin.Address, b Bulk, asJSON bool, out io.Writer) error {
	q := b.Act
	q.DryRun = true
	var dry admin.Acted
	if err := admin.Call(ctx, nc, addr, b.Endpoint, q, &dry); err != nil {
		return err
	}
	filter := len(b.Act.IDs) == 0
	if !asJSON {
		fmt.Fprintf(out, "%d rows to %s%s\n", dry.Matched, b.Verb, filterText(b.Act, filter))
	}
	if dry.Matched == 0 || filter && !b.All {
		if asJSON {
			return json.NewEncoder(out).Encode(dry)
		}
		if dry.Matched > 0 {
			fmt.Fprintf(out, "nothing done: give --all to %s them\n", b.Verb)
		}
		return nil
	}
	q.DryRun, q.IDs, q.Status, q.Before, q.Seen = false, dry.IDs, "", time.Time{}, dry.Seen
	var done admin.Acted
	if err := admin.Call(ctx, nc, addr, b.Endpoint, q, &done); errors.Is(err, admin.ErrNoRun) {
		return fmt.Errorf("%w: the run may have acted on some of the %d rows before it went (each change is recorded once): list them again", err, dry.Matched)
	} else if err != nil {
		return err
	}
	if asJSON {
		if err := json.NewEncoder(out).Encode(done); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "%d done, %d skipped\n", len(done.Done), done.SkippedCount)
		for _, s := range done.Skipped {
			fmt.Fprintf(out, "skipped %s: %s\n", s.ID, s.Reason)
		}
		if n := done.SkippedCount - len(done.Skipped); n > 0 {
			fmt.Fprintf(out, "and %d more skipped\n", n)
		}
	}
	if done.SkippedCount > 0 {
		return fmt.Errorf("%w: %d of %d (list them again to see them now)", ErrSkipped, done.SkippedCount, dry.Matched)
	}
	return nil
}

func filterText(q admin.Act, filter bool) string {
	if !filter {
		return fmt.Sprintf(" of the %d ids given", len(q.IDs))
	}
	s := fmt.Sprintf(" in status %s", q.Status)
	if !q.Before.IsZero() {
		s += " last changed before " + q.Before.Format(time.RFC3339)
	}
	return s
}

// Show prints the answer of endpoint at addr to req (Print).
func Show(ctx context.Context, nc *nats.Conn, addr admin.Address, endpoint string, req any, out io.Writer) error {
	var v any
	if err := admin.Call(ctx, nc, addr, endpoint, req, &v); err != nil {
		return err
	}
	return Print(out, v)
}

// Print writes v as indented JSON.
func Print(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ParseTime reads a time given to flag: a date (2026-12-01, UTC) or RFC
// 3339; "" is the zero time.
func ParseTime(s, flag string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.DateOnly, time.RFC3339} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q: want a date (2026-12-01) or an RFC 3339 time (2026-12-01T08:00:00Z)", flag, s)
}

// Outbox lists the rows in status at addr (outbox.list: without their
// payloads, which outbox.show gives).
func Outbox(ctx context.Context, nc *nats.Conn, addr admin.Address, status ledger.Status, limit int) ([]admin.Row, error) {
	var rows admin.Rows
	err := admin.Call(ctx, nc, addr, "outbox.list", admin.OutboxList{Status: status, Limit: limit}, &rows)
	return rows.Rows, err
}

// RunStatus is one run's status endpoint's answer, and where it is.
type RunStatus struct {
	Run    admin.Found  `json:"run"`
	Status admin.Status `json:"status"`
	Err    string       `json:"error,omitempty"`
}

// Statuses asks every owner's API that t names (all partitions when t
// names none) for its status, through nc at url: none answering is an
// error naming what was asked and where.
func Statuses(ctx context.Context, nc *nats.Conn, url string, t Target) ([]RunStatus, error) {
	found, match, err := discover(ctx, nc, t)
	if err != nil {
		return nil, err
	}
	var out []RunStatus
	for _, f := range match {
		r := RunStatus{Run: f}
		if err := admin.Call(ctx, nc, f.Address, "status", nil, &r.Status); err != nil {
			r.Err = err.Error()
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: none of the %d answering through %s is %s", ErrNotOne, len(found), url, t.describe())
	}
	return out, nil
}

// PrintStatuses writes each run's status as text: where it is, its
// outbox, and a line per need; it says whether any needs a person and
// whether any could not answer.
func PrintStatuses(out io.Writer, rs []RunStatus, now time.Time) (attention, failed bool) {
	for _, r := range rs {
		where := cmp.Or(r.Run.Site, admin.NoSite) + " " + r.Run.Stream + "/" + r.Run.Durable
		st := r.Status
		if r.Err != "" {
			fmt.Fprintf(out, "%s: %s\n", where, r.Err)
			failed = true
			continue
		}
		fmt.Fprintf(out, "%s (%s): %d rows, outbox queued %d, sending %d, review %d, failed %d; %d dead letters, %d conflicts\n",
			where, st.Role, st.Ledger.Processed, st.Outbox[ledger.StatusQueued], st.Outbox[ledger.StatusSending], st.Outbox[ledger.StatusReview],
			st.Outbox[ledger.StatusFailed], st.Ledger.DeadLetters, st.Ledger.Conflicts)
		for _, n := range st.Attention {
			fmt.Fprintf(out, "  ATTENTION %s\n", n.Text(now))
			attention = true
		}
	}
	return attention, failed
}
