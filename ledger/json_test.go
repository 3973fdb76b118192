package ledger_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"

	"github.com/jetledger/jetledger/ledger"
)

// Every listing the CLI prints with --json has snake_case keys.
func TestListingsHaveSnakeCaseJSON(t *testing.T) {
	t.Parallel()
	snake := regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)
	for _, v := range []any{ledger.OutboxItem{}, ledger.DeadLetter{}, ledger.ConflictRecord{}, ledger.Stats{}, ledger.PruneResult{}} {
		typ := reflect.TypeOf(v)
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for k := range m {
			if !snake.MatchString(k) {
				t.Errorf("%s: JSON key %q is not snake_case", typ.Name(), k)
			}
		}
		for i := range typ.NumField() {
			if f := typ.Field(i); f.IsExported() && f.Tag.Get("json") == "" {
				t.Errorf("%s.%s has no json tag", typ.Name(), f.Name)
			}
		}
	}
}
