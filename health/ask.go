package health

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// ErrNoPEM: a CA file holds no PEM certificate.
var ErrNoPEM = errors.New("health: no PEM certificate in the file")

// NewClient is a client for Ask that trusts the CA in caFile (PEM), for
// an https /healthz; caFile "": the system's roots.
func NewClient(caFile string, timeout time.Duration) (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		if tc.RootCAs = x509.NewCertPool(); !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %w", caFile, ErrNoPEM)
		}
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: tc}}, nil
}

// Ask reads the report a Handler serves at url (http or https) with
// client (nil: http.DefaultClient): a container's health check, which
// has no curl. The error is one of reaching it or of its answer; an
// unhealthy report is a Report with Healthy false, not an error.
func Ask(ctx context.Context, client *http.Client, url string) (Report, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Report{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Report{}, err
	}
	defer resp.Body.Close()
	var rep Report
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &rep)
	}
	switch {
	case err != nil:
		return Report{}, fmt.Errorf("%s answered %s, not a health report: %w", url, resp.Status, err)
	case rep.Checks == nil:
		return Report{}, fmt.Errorf("%s answered %s, not a health report", url, resp.Status)
	case rep.Healthy != (resp.StatusCode == http.StatusOK):
		return Report{}, fmt.Errorf("%s answered %s with healthy=%v", url, resp.Status, rep.Healthy)
	}
	return rep, nil
}
