package console

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/jetledger/jetledger/node"
)

// ErrOpenListen: a console that is not on loopback must have sign-in.
var ErrOpenListen = errors.New("console: a console on an address that is not loopback needs sign-in")

// ServeConfig is what Serve serves: the handler's Options, where, and how.
type ServeConfig struct {
	Options
	// Listen is the address to serve on (127.0.0.1:8080, say). One that
	// is not loopback is refused without Options.Users.
	Listen string
	// TLSCert and TLSKey are PEM files: both, to serve HTTPS (and mark the
	// session cookie Secure), or neither.
	TLSCert, TLSKey string
	// Ready, when set, is told the address served once it listens.
	Ready func(url string)
}

// Serve serves the console on cfg.Listen until ctx ends, then shuts down
// within a few seconds.
func Serve(ctx context.Context, cfg ServeConfig) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	var tlsCfg *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("console: TLS: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		cfg.Secure = true
	}
	h, err := NewHandler(&cfg.Options)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("console: listen: %w", err)
	}
	scheme := "http"
	if tlsCfg != nil {
		l, scheme = tls.NewListener(l, tlsCfg), "https"
	}
	mux := http.NewServeMux()
	mux.Handle(h.prefix+"/", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h.Start(ctx)
	url := fmt.Sprintf("%s://%s%s/", scheme, l.Addr(), h.prefix)
	h.log.Info("console: serving", "url", url, "sign_in", cfg.Users != nil)
	if cfg.Ready != nil {
		cfg.Ready(url)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return fmt.Errorf("console: %w", err)
	case <-ctx.Done():
	}
	stop, cancelStop := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelStop()
	return srv.Shutdown(stop)
}

// Check refuses a configuration Serve would: half of TLS, or a listen
// that is not loopback without sign-in (ErrOpenListen).
func (cfg ServeConfig) Check() error {
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return errors.New("console: give both a TLS certificate and its key, or neither")
	}
	if cfg.Users == nil && !Loopback(cfg.Listen) {
		return fmt.Errorf("%w: %s can be reached from other hosts, and with no users file anyone who reaches it could act; give a users file, or listen on 127.0.0.1", ErrOpenListen, cfg.Listen)
	}
	return nil
}

// Loopback says whether addr (host:port) is reachable from this host only.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && node.Loopback(host)
}
