package ledger

import (
	"fmt"
	"slices"
	"strings"

	"github.com/jetledger/jetledger/internal/say"
)

// Listing is what a caller asks of a listing of rows (ListOutbox,
// DeadLetters, Conflicts). Check refuses what the listing cannot mean
// before the ledger is opened.
type Listing struct {
	// Status is ListOutbox's: only rows in it, one of Statuses. Default
	// "": every status.
	Status Status
	// Limit is the most rows listed. Default 0: all. Not negative.
	Limit int
	// Names say the fields in the caller's words in a refusal
	// (*ConfigError): a field's name ("Limit") to the caller's
	// ("--limit"). A field not in it is said as itself.
	Names map[string]string
}

// Check refuses (*ConfigError) a Status that is none of Statuses and a
// negative Limit, naming them as Names says.
func (l Listing) Check() error {
	switch {
	case l.Status != "" && !slices.Contains(Statuses, l.Status):
		names := make([]string, len(Statuses))
		for i, s := range Statuses {
			names[i] = string(s)
		}
		return refuse("%s %q: want one of %s", say.Name(l.Names, "Status"), l.Status, strings.Join(names, ", "))
	case l.Limit < 0:
		return refuse("%s %d: want 0 (all) or more", say.Name(l.Names, "Limit"), l.Limit)
	}
	return nil
}

// Resolution is how a person settles an outbox row in review after
// checking the destination (Store.Resolve). Check refuses one Resolve
// would before the ledger is opened.
type Resolution struct {
	// As is what the row becomes: StatusSent or StatusFailed. Required.
	As Status
	// ExternalID is the destination's id for the item. Required with
	// StatusSent.
	ExternalID string
	// Names say the fields in the caller's words in a refusal
	// (*ConfigError): a field's name ("As") to the caller's ("--as"). A
	// field not in it is said as itself.
	Names map[string]string
}

// Check refuses (*ConfigError) a Resolution without As, with another As
// than sent or failed, or as sent without ExternalID.
func (r Resolution) Check() error {
	as := say.Name(r.Names, "As")
	switch {
	case r.As == "":
		return refuse("%s is required: %s or %s", as, StatusSent, StatusFailed)
	case r.As != StatusSent && r.As != StatusFailed:
		return refuse("%s %q: want %s or %s", as, r.As, StatusSent, StatusFailed)
	case r.As == StatusSent && r.ExternalID == "":
		return refuse("%s %s needs %s: the destination's id for the item", as, StatusSent, say.Name(r.Names, "ExternalID"))
	}
	return nil
}

func refuse(format string, a ...any) error {
	return &ConfigError{Reason: fmt.Sprintf(format, a...)}
}
