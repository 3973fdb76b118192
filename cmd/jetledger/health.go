package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/jetledger/jetledger/health"
)

// healthCmd is `jetledger health`: the container's health check.
type healthCmd struct {
	URL   string `name:"url" default:"http://127.0.0.1:9464/healthz" help:"the running process's /healthz (run --metrics)"`
	TLSCA string `name:"tls-ca" placeholder:"FILE" help:"CA certificate (PEM) of an https --url (run --metrics-tls-cert)"`
	jsonFlag
}

func (c *healthCmd) Run(inv *invocation) error {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLSCA != "" {
		pem, err := os.ReadFile(c.TLSCA)
		if err != nil {
			return usagef("--tls-ca: %v", err)
		}
		if tc.RootCAs = x509.NewCertPool(); !tc.RootCAs.AppendCertsFromPEM(pem) {
			return usagef("--tls-ca %s: no PEM certificate in it", c.TLSCA)
		}
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	rep, err := health.Ask(inv.ctx, client, c.URL)
	if err != nil {
		return err
	}
	if c.JSON {
		err = printJSON(inv.stdout, rep)
	} else {
		for _, name := range slices.Sorted(maps.Keys(rep.Checks)) {
			fmt.Fprintf(inv.stdout, "%-10s %s\n", name, rep.Checks[name])
		}
	}
	if err == nil && !rep.Healthy {
		err = errors.New("unhealthy")
	}
	return err
}
