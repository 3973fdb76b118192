package health_test

import (
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/jetledger/jetledger/health"
	"github.com/jetledger/jetledger/ledger"
)

func Example() {
	dir, err := os.MkdirTemp("", "health")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.DiscardHandler)
	st, err := ledger.Open(filepath.Join(dir, "ledger.db"), ledger.Config{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	h, err := health.New(health.Config{Logger: quiet}, health.Database(st))
	if err != nil {
		log.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	fmt.Println(rec.Code, rec.Body.String())
	// Output: 200 {"healthy":true,"checks":{"database":"ok"}}
}
