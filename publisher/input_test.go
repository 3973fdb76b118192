package publisher_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/publisher"
)

// flags are a command line's names for the Input's and Config's fields.
var flags = map[string]string{"Subject": "--subject", "Data": "--data", "ID": "--id", "IDField": "--id-field",
	"Raw": "--raw", "Lines": "standard input", "Attempts": "--attempts", "Timeout": "--timeout"}

// Every refusal of an Input is a *ConfigError saying it in Names' words,
// and the refusal it says for errors.Is.
func TestInputRefusals(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", publisher.MaxIDLen+1)
	for _, tt := range []struct {
		name    string
		in      publisher.Input
		wantErr error
		want    string
	}{
		{"no subject", publisher.Input{Data: []byte("{}")}, publisher.ErrNoSubject, "--subject is required"},
		{"id without data", publisher.Input{Subject: "s", ID: "x"}, publisher.ErrInvalidConfig, "--id needs --data; for standard input use --id-field"},
		{"id too long", publisher.Input{Subject: "s", Data: []byte("{}"), ID: long}, publisher.ErrIDTooLong,
			"--id: the id is 513 bytes; a consumer dead-letters a Nats-Msg-Id over 512 bytes, so nothing was published"},
		{"data not JSON", publisher.Input{Subject: "s", Data: []byte("{")}, publisher.ErrNotJSON, "--data is not valid JSON (use --raw to publish it anyway)"},
		{"data not an object", publisher.Input{Subject: "s", Data: []byte("1"), IDField: "id"}, publisher.ErrNotObject,
			"--data: --id-field needs a JSON object: json: cannot unmarshal number into Go value of type map[string]json.RawMessage"},
		{"data without the field", publisher.Input{Subject: "s", Data: []byte("{}"), IDField: "id"}, publisher.ErrNoIDField, `--data: no field "id" for the id`},
		{"line not JSON", publisher.Input{Subject: "s", Lines: strings.NewReader("{}\n\n{")}, publisher.ErrNotJSON,
			"standard input line 3 is not valid JSON; nothing was published"},
		{"line's bad id", publisher.Input{Subject: "s", IDField: "id", Lines: strings.NewReader(`{"id":true}`)}, publisher.ErrBadIDField,
			`standard input line 1: field "id" must be a non-empty string or a number; nothing was published`},
		{"nothing", publisher.Input{Subject: "s", Lines: strings.NewReader("\n")}, publisher.ErrInvalidConfig,
			"nothing to publish: give --data or JSON lines on standard input"},
		{"no lines", publisher.Input{Subject: "s"}, publisher.ErrInvalidConfig, "nothing to publish: give --data or JSON lines on standard input"},
	} {
		tt.in.Names = flags
		_, err := tt.in.Messages()
		var ce *publisher.ConfigError
		if !errors.Is(err, tt.wantErr) || !errors.Is(err, publisher.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Reason != tt.want {
			t.Errorf("%s: %v, want a *ConfigError wrapping %v saying %q", tt.name, err, tt.wantErr, tt.want)
		}
	}
}

func TestInputMessages(t *testing.T) {
	t.Parallel()
	msgs, err := publisher.Input{Subject: "s", Data: []byte(`{"id":7}`), IDField: "id"}.Messages()
	if err != nil || len(msgs) != 1 || msgs[0].ID != "7" || msgs[0].Subject != "s" {
		t.Fatalf("data: %+v, %v", msgs, err)
	}
	msgs, err = publisher.Input{Subject: "s", Lines: strings.NewReader("a\n\nb\n"), Raw: true, ExpectStream: "S"}.Messages()
	if err != nil || len(msgs) != 2 || string(msgs[1].Data) != "b" || msgs[0].ExpectStream != "S" || msgs[1].ExpectStream != "S" {
		t.Fatalf("lines: %+v, %v", msgs, err)
	}
}

// A Config out of range is a *ConfigError naming the field as Names says;
// with Explicit a zero is refused rather than taken as the default.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  publisher.Config
		want string
	}{
		{"zero", publisher.Config{}, ""},
		{"zero attempts given", publisher.Config{Explicit: true, Timeout: time.Second}, "--attempts 0: want 1 to 100"},
		{"too many attempts", publisher.Config{Attempts: 101}, "--attempts 101: want 1 to 100"},
		{"zero timeout given", publisher.Config{Explicit: true, Attempts: 1}, "--timeout 0s: want more than 0 and at most 1h0m0s"},
		{"timeout too long", publisher.Config{Timeout: 2 * time.Hour}, "--timeout 2h0m0s: want more than 0 and at most 1h0m0s"},
		{"negative retry wait, a Go program's", publisher.Config{RetryWait: -1}, "RetryWait -1ns: must not be negative"},
		{"negative window", publisher.Config{Window: -1}, "Window -1: must not be negative"},
	} {
		tt.cfg.Names = flags
		err := tt.cfg.Validate()
		var ce *publisher.ConfigError
		if tt.want == "" && err != nil || tt.want != "" && (!errors.Is(err, publisher.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Reason != tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
