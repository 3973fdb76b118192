package partition

import (
	"errors"
	"testing"
)

func TestTransform(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, subject string
		key           int
		wantDest      string
		wantErr       error
	}{
		{"first key", "pay.*", 1, "{{partition(4,1)}}.pay.{{wildcard(1)}}", nil},
		{"second key", "orders.*.*.>", 2, "{{partition(4,2)}}.orders.{{wildcard(1)}}.{{wildcard(2)}}.>", nil},
		{"'>' not last", "orders.>.*", 1, "", ErrWildcardNotLast},
		{"key past the wildcards", "orders.*", 2, "", ErrNoKey},
		{"no wildcard", "orders", 1, "", ErrNoKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr, err := Transform(tt.subject, 4, tt.key)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err == nil && (tr.Source != tt.subject || tr.Destination != tt.wantDest) {
				t.Fatalf("transform %+v, want %s -> %s", tr, tt.subject, tt.wantDest)
			}
		})
	}
}
