package stream_test

import (
	"testing"

	"github.com/jetledger/jetledger/stream"
)

// A stream captures subjects with wildcards; a publish needs one without.
func TestSubjects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		subject        string
		valid, literal bool
	}{
		{"orders.site1", true, true},
		{"orders.*", true, false},
		{"orders.>", true, false},
		{"orders.>.x", false, false},
		{"orders.a*", false, false},
		{"orders..x", false, false},
		{".orders", false, false},
		{"orders.", false, false},
		{"or ders", false, false},
		{"", false, true}, // a publish's emptiness is its caller's check
	}
	for _, tt := range tests {
		if got := stream.ValidSubject(tt.subject); got != tt.valid {
			t.Errorf("ValidSubject(%q) = %v, want %v", tt.subject, got, tt.valid)
		}
		if got := stream.LiteralSubject(tt.subject); got != tt.literal {
			t.Errorf("LiteralSubject(%q) = %v, want %v", tt.subject, got, tt.literal)
		}
	}
}
