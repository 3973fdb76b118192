package consumer_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
	"time"

	"github.com/jetledger/jetledger/consumer"
)

// TestAllowSequenceIDsDocSaysTheFormat: Config.AllowSequenceIDs's doc names
// the id SequenceID makes, stream instance included, not an older format.
func TestAllowSequenceIDsDocSaysTheFormat(t *testing.T) {
	t.Parallel()
	if got := consumer.SequenceID("EV", time.Unix(0, 5), 7); got != "EV@5/7" {
		t.Fatalf("SequenceID = %q, want EV@5/7", got)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "consumer.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	ast.Inspect(f, func(n ast.Node) bool {
		if fld, ok := n.(*ast.Field); ok && len(fld.Names) == 1 && fld.Names[0].Name == "AllowSequenceIDs" {
			doc = fld.Doc.Text()
		}
		return doc == ""
	})
	if !strings.Contains(doc, `"<stream>@<created>/<seq>"`) || strings.Contains(doc, `"<stream>/<sequence>"`) {
		t.Fatalf("Config.AllowSequenceIDs doc %q: want it to say <stream>@<created>/<seq>", doc)
	}
}
