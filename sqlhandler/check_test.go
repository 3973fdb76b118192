package sqlhandler

import "testing"

// A schema that attaches another file is left to the ledger, however it is
// written: the early check would write that file a second time.
func TestWritesElsewhereSeesPastComments(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		schema string
		want   bool
	}{
		{"ATTACH DATABASE 'a.db' AS a;", true},
		{"-- audit\n  /* its own file */ attach 'a.db' AS a;", true},
		{"CREATE TABLE t (x);\nVACUUM INTO 'copy.db';", true},
		{"CREATE TABLE attach_log (x); -- ATTACH is only a word here", false},
		{"INSERT INTO t VALUES ('ATTACH');", false},
	} {
		if got := writesElsewhere(tt.schema); got != tt.want {
			t.Errorf("writesElsewhere(%q) = %v, want %v", tt.schema, got, tt.want)
		}
	}
}
