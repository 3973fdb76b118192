package service

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/jetledger/jetledger/consumer"
	"github.com/jetledger/jetledger/ledger"
)

// recorded is a ledger in a directory of its own in which Run recorded
// pairs (stream, durable).
func recorded(tb testing.TB, pairs ...[2]string) string {
	tb.Helper()
	db := filepath.Join(tb.TempDir(), "l.db")
	st, err := ledger.Open(db, ledger.Config{Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	for _, p := range pairs {
		if err := st.RememberConsumer(context.Background(), p[0], p[1], ""); err != nil {
			tb.Fatal(err)
		}
	}
	return db
}

func TestChooseAt(t *testing.T) {
	t.Parallel()
	one := [][2]string{{"PAY", "payer"}}
	for _, tt := range []struct {
		name    string
		pairs   [][2]string // nil: no ledger
		want    Want
		chosen  Chosen
		wantErr error
	}{
		{"given", one, Want{Stream: "S", Durable: "d"}, Chosen{Stream: "S", Durable: "d", From: FromGiven}, nil},
		{"no ledger yet", nil, Want{}, Chosen{Stream: StreamDefault, Durable: consumer.DurableDefault, From: FromDefault, Read: true}, nil},
		{"none recorded", [][2]string{}, Want{}, Chosen{Stream: StreamDefault, Durable: consumer.DurableDefault, From: FromDefault, Read: true}, nil},
		{"the one recorded", one, Want{}, Chosen{Stream: "PAY", Durable: "payer", From: FromLedger, Read: true, Recorded: 1}, nil},
		{"the durable of the stream given", one, Want{Stream: "PAY"}, Chosen{Stream: "PAY", Durable: "payer", From: FromLedger, Read: true, Recorded: 1}, nil},
		{"another stream given", one, Want{Stream: "OTHER"}, Chosen{Stream: "OTHER", Durable: consumer.DurableDefault, From: FromGiven, Read: true, Recorded: 1}, nil},
		{"a new durable takes the stream served", one, Want{Durable: "new"}, Chosen{Stream: "PAY", Durable: "new", From: FromLedger, Read: true, Recorded: 1}, nil},
		{"the durable picks its stream", [][2]string{{"PAY", "a"}, {"ORDERS", "b"}}, Want{Durable: "b"}, Chosen{Stream: "ORDERS", Durable: "b", From: FromLedger, Read: true, Recorded: 2}, nil},
		{"two streams", [][2]string{{"PAY", "jetledger"}, {"ORDERS", "jetledger"}}, Want{}, Chosen{}, ErrAmbiguous},
		{"two durables", [][2]string{{"PAY", "a"}, {"PAY", "b"}}, Want{Stream: "PAY"}, Chosen{}, ErrAmbiguous},
		{"a new durable, two streams served", [][2]string{{"PAY", "a"}, {"ORDERS", "b"}}, Want{Durable: "new"}, Chosen{}, ErrAmbiguous},
	} {
		db := filepath.Join(t.TempDir(), "l.db")
		if tt.pairs != nil {
			db = recorded(t, tt.pairs...)
		}
		got, err := ChooseAt(context.Background(), db, ledger.Config{Logger: quiet}, tt.want)
		if !errors.Is(err, tt.wantErr) || got != tt.chosen {
			t.Errorf("%s: ChooseAt = %+v, %v; want %+v, %v", tt.name, got, err, tt.chosen, tt.wantErr)
		}
		if _, err := os.Stat(db); tt.pairs == nil && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: ChooseAt made %s (%v)", tt.name, db, err)
		}
	}
}

// The ambiguity names the pairs that fit and the settings in Names' words.
func TestAmbiguousErrorSaysTheNames(t *testing.T) {
	t.Parallel()
	names := Names{Program: "run", Settings: map[string]string{"Stream": "--stream", "Durable": "--durable"}}
	pair := func(s, d string) ledger.Consumer { return ledger.Consumer{Stream: s, Durable: d} }
	for _, tt := range []struct {
		name string
		err  *AmbiguousError
		text string
	}{
		{"two durables", &AmbiguousError{"DB", []ledger.Consumer{pair("PAY", "a"), pair("PAY", "b")}, names},
			"--durable not given and DB records 2 durables that run served on stream PAY: stream PAY (durable a), stream PAY (durable b); give --durable to say which"},
		{"two streams", &AmbiguousError{"DB", []ledger.Consumer{pair("ORDERS", "a"), pair("PAY", "a")}, names},
			"--stream not given and DB records 2 consumers that run served: stream ORDERS (durable a), stream PAY (durable a); give --stream to say which"},
		{"both", &AmbiguousError{"DB", []ledger.Consumer{pair("ORDERS", "a"), pair("PAY", "a"), pair("PAY", "b")}, names},
			"--stream not given and DB records 3 consumers that run served: stream ORDERS (durable a), stream PAY (durable a), stream PAY (durable b); give --stream and --durable to say which"},
		{"a Go program's", &AmbiguousError{"DB", []ledger.Consumer{pair("PAY", "a"), pair("PAY", "b")}, Names{}.withDefaults()},
			"Durable not given and DB records 2 durables that the program served on stream PAY: stream PAY (durable a), stream PAY (durable b); give Durable to say which"},
	} {
		if got := tt.err.Error(); got != tt.text {
			t.Errorf("%s:\n%s\nwant\n%s", tt.name, got, tt.text)
		}
	}
	// Choose gives the path and the pairs, in Want's names.
	db := recorded(t, [2]string{"PAY", "a"}, [2]string{"PAY", "b"})
	_, err := ChooseAt(context.Background(), db, ledger.Config{Logger: quiet}, Want{Names: names})
	var amb *AmbiguousError
	if !errors.As(err, &amb) || amb.Path != db || len(amb.Match) != 2 || amb.Names.Say("Durable") != "--durable" {
		t.Fatalf("ChooseAt: %v, want an *AmbiguousError of %s with 2 pairs", err, db)
	}
}
