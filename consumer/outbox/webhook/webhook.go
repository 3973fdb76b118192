package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jetledger/jetledger/consumer/outbox"
	"github.com/jetledger/jetledger/consumer/outbox/webhook/signature"

	"github.com/jetledger/jetledger/ledger"
)

// Header names sent with every item; package signature verifies them.
const (
	HeaderIdempotencyKey = signature.HeaderIdempotencyKey // the outbox row's id; signed by v2
	HeaderMessageID      = signature.HeaderMessageID      // the consumed message's id; signed by v2
	HeaderTimestamp      = signature.HeaderTimestamp      // Unix seconds; signed by v2 and v1
	// HeaderSignature holds "v2=" + hex HMAC-SHA256 of "v2\n" timestamp "\n"
	// key "\n" message id "\n" body, one per secret, then the deprecated
	// "v1=" + hex HMAC-SHA256 of timestamp "." body, one per secret, unless
	// Config.OmitV1; comma-separated.
	HeaderSignature = signature.HeaderSignature
)

// Sink posts outbox items to a URL.
type Sink struct {
	cfg     Config
	secrets []string // Secret then Secrets: every request is signed with each
}

var (
	_ outbox.Sink    = (*Sink)(nil)
	_ outbox.Deleter = (*Sink)(nil)
	_ outbox.Looker  = (*Sink)(nil)
)

// Name returns the sink's name.
func (s *Sink) Name() string { return s.cfg.Name }

// Idempotent reports whether the destination honours Idempotency-Key.
func (s *Sink) Idempotent() bool { return s.cfg.Idempotent }

// Timeout is the per-request timeout.
func (s *Sink) Timeout() time.Duration { return s.cfg.Timeout }

// Sign returns the v1 entry of the signature header for body at timestamp
// ts: "v1=" + hex HMAC-SHA256(secret, ts + "." + body).
//
// Deprecated: v1 signs neither the Idempotency-Key nor the message id, so
// a captured request can be replayed under another key. Verify with
// signature.Verify, which checks v2; signature.SignV1 is this.
func Sign(secret, ts string, body []byte) string {
	return signature.SignV1([]string{secret}, ts, body)
}

// Send POSTs the item once. 2xx: sent, with the external id from the
// response. A status in Config.RetryOn: outbox.ErrRetryable. Other 4xx:
// outbox.ErrRejected. Anything else (5xx, 3xx): outbox.ErrAmbiguous,
// since the destination may have done the work before answering so. With no
// response: ErrRetryable when the request provably never arrived (connection
// refused, DNS failure, TLS certificate rejected), otherwise ErrAmbiguous
// (timeout, reset, connection closed after the request was written).
func (s *Sink) Send(ctx context.Context, it ledger.OutboxItem) (string, error) {
	if s.cfg.URL == "" {
		return "", &outbox.SendError{Kind: outbox.ErrRejected, Detail: "webhook: no URL configured"}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(it.Payload))
	if err != nil {
		return "", &outbox.SendError{Kind: outbox.ErrRejected, Detail: redactErr(err).Error()}
	}
	// net/http repeats a request on its own (it carries an Idempotency-Key)
	// when a reused connection drops before the answer, after the destination
	// may have done the work, if it can replay the body: when GetBody is set
	// or the body is empty (http.NoBody). Neither, then: the dispatcher is the
	// only layer that ever re-sends.
	req.Body, req.GetBody = io.NopCloser(bytes.NewReader(it.Payload)), nil
	req.ContentLength = int64(len(it.Payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderIdempotencyKey, it.ID)
	req.Header.Set(HeaderMessageID, it.MessageID)
	if len(s.secrets) > 0 {
		ts := signature.Timestamp(time.Now())
		sig := signature.Sign(s.secrets, ts, it.ID, it.MessageID, it.Payload)
		if !s.cfg.OmitV1 {
			sig += ", " + signature.SignV1(s.secrets, ts, it.Payload)
		}
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, sig)
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return "", transportError(redactErr(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if err != nil {
			// Accepted, but its id is unreadable: it is there, so not a failure.
			return "", nil
		}
		return ExternalID(resp.Header, body, s.cfg.ExternalIDHeader, s.cfg.ExternalIDField, ""), nil
	case slices.Contains(s.cfg.RetryOn, resp.StatusCode):
		// The destination documents this status as "not processed".
		return "", &outbox.SendError{Kind: outbox.ErrRetryable, Status: resp.StatusCode, Detail: bodyExcerpt(body)}
	case resp.StatusCode >= 400 && resp.StatusCode <= 499:
		// The destination refused the request itself.
		return "", &outbox.SendError{Kind: outbox.ErrRejected, Status: resp.StatusCode, Detail: bodyExcerpt(body)}
	default:
		// A 5xx: the application, or one behind a gateway, may have committed
		// the work and then failed. A 3xx: redirects are not followed, and a
		// 303 is how many APIs answer a POST they did process.
		return "", &outbox.SendError{Kind: outbox.ErrAmbiguous, Status: resp.StatusCode, Detail: bodyExcerpt(body)}
	}
}

// ExternalID picks the destination's id for an item out of a 2xx response:
// the named header, else the named top-level JSON field (string or number),
// else fallback.
func ExternalID(h http.Header, body []byte, header, field, fallback string) string {
	if header != "" {
		if v := strings.TrimSpace(h.Get(header)); v != "" {
			return v
		}
	}
	if field != "" && len(body) > 0 {
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) == nil {
			if raw, ok := obj[field]; ok {
				var s string
				if json.Unmarshal(raw, &s) == nil && strings.TrimSpace(s) != "" {
					return strings.TrimSpace(s)
				}
				var n json.Number
				if json.Unmarshal(raw, &n) == nil {
					return n.String()
				}
			}
		}
	}
	return fallback
}

func bodyExcerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > excerpt {
		s = s[:excerpt] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}

// transportError classifies a request that got no response: retryable only
// when no byte of it can have reached the destination.
func transportError(err error) error {
	if neverSent(err) {
		return &outbox.SendError{Kind: outbox.ErrRetryable, Detail: err.Error()}
	}
	return &outbox.SendError{Kind: outbox.ErrAmbiguous, Detail: err.Error()}
}

// neverSent reports a failure before the request could be written: no
// connection (refused, name not resolved), or a TLS handshake that rejected
// the server's certificate, which happens before any request byte is sent.
func neverSent(err error) bool {
	var (
		dnsErr      *net.DNSError
		certErr     *tls.CertificateVerificationError
		unknownCA   x509.UnknownAuthorityError
		badHost     x509.HostnameError
		invalidCert x509.CertificateInvalidError
	)
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dnsErr) || errors.As(err, &certErr) ||
		errors.As(err, &unknownCA) || errors.As(err, &badHost) || errors.As(err, &invalidCert)
}

// Delete removes a sent item at DeleteURL: 2xx is deleted. 404 and 410
// wrap outbox.ErrNoSuchItem: a server with no DELETE route answers 404 too,
// so it is not a delete until proved. A request that never left, and any
// other 4xx, wrap outbox.ErrNotDeleted; anything else (a timeout, a 5xx)
// may have deleted. Without DeleteURL it is errors.ErrUnsupported.
func (s *Sink) Delete(ctx context.Context, externalID string) error {
	if s.cfg.DeleteURL == "" {
		return fmt.Errorf("webhook: no delete URL configured: %w", errors.ErrUnsupported)
	}
	target := strings.ReplaceAll(s.cfg.DeleteURL, "{external_id}", url.PathEscape(externalID))
	status, _, body, err := s.do(ctx, http.MethodDelete, target)
	switch {
	case err != nil && neverSent(err):
		return fmt.Errorf("webhook: delete %s: %w (%w)", externalID, err, outbox.ErrNotDeleted)
	case err != nil:
		return fmt.Errorf("webhook: delete %s: %w", externalID, err)
	case status/100 == 2:
		return nil
	case status == http.StatusNotFound || status == http.StatusGone:
		return fmt.Errorf("webhook: delete %s: status %d: %w", externalID, status, outbox.ErrNoSuchItem)
	case status/100 == 4:
		return fmt.Errorf("webhook: delete %s: status %d: %s (%w)", externalID, status, bodyExcerpt(body), outbox.ErrNotDeleted)
	}
	return fmt.Errorf("webhook: delete %s: status %d: %s", externalID, status, bodyExcerpt(body))
}

// Lookup asks LookupURL whether the destination holds the item, by its
// idempotency key. 2xx: found, with the external id read as for a send;
// 404 or 410: never seen; anything else: an error (it cannot say now).
// Without LookupURL it is errors.ErrUnsupported.
func (s *Sink) Lookup(ctx context.Context, it ledger.OutboxItem) (string, bool, error) {
	if s.cfg.LookupURL == "" {
		return "", false, fmt.Errorf("webhook: no lookup URL configured: %w", errors.ErrUnsupported)
	}
	target := strings.ReplaceAll(s.cfg.LookupURL, "{key}", url.PathEscape(it.ID))
	status, h, body, err := s.do(ctx, http.MethodGet, target)
	switch {
	case err != nil:
		return "", false, fmt.Errorf("webhook: look up %s: %w", it.ID, err)
	case status/100 == 2:
		return ExternalID(h, body, s.cfg.ExternalIDHeader, s.cfg.ExternalIDField, ""), true, nil
	case status == http.StatusNotFound || status == http.StatusGone:
		return "", false, nil
	}
	return "", false, fmt.Errorf("webhook: look up %s: status %d: %s", it.ID, status, bodyExcerpt(body))
}

// do makes a bodiless request within the sink's timeout.
func (s *Sink) do(ctx context.Context, method, target string) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return 0, nil, nil, redactErr(err)
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return 0, nil, nil, redactErr(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, resp.Header, body, nil
}
