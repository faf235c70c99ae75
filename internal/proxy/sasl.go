package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/auth"
	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/wire"
)

// The client-side SASL gate: on a SASL listener a session starts
// unauthenticated and only ApiVersions, SaslHandshake and SaslAuthenticate
// pass. In terminate mode the session answers the SASL requests itself
// with an auth.Server; in pass-through mode it forwards them and reads the
// broker's verdict, binding the principal only once the broker's exchange
// has completed.

// errPreAuth is a request other than the SASL ones before authentication.
var errPreAuth = errors.New("request before authentication")

// authState is a session's SASL progress.
type authState struct {
	needed    bool              // a SASL listener and not authenticated yet
	mechanism string            // chosen by SaslHandshake
	server    auth.Server       // terminate mode
	steps     int               // passthrough: SaslAuthenticate responses seen
	user      string            // passthrough: from the client message the broker judges
	waiting   chan brokerAnswer // passthrough: the broker's answer to a step
	// answer is the broker's answer passthroughResponse read, handed to
	// the reader by signalPassthrough once the response is written and
	// the served hooks have run (they read the principal the reader then
	// binds). Responder only.
	answer   brokerAnswer
	answered bool
	raw      bool // terminate, SaslHandshake v0: raw tokens follow
}

// brokerAnswer is a broker's SaslAuthenticate answer in pass-through mode,
// handed from the responder to the reader, which judges it.
type brokerAnswer struct {
	code  int16
	bytes []byte
	ok    bool // the response could be decoded
}

// clientTLS completes a TLS listener's handshake and, for a verified
// client certificate, maps it to the principal (mTLS).
func (s *session) clientTLS(ctx context.Context) error {
	tc, ok := s.client.(*tls.Conn)
	if !ok {
		return nil
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	s.info.TLS = true
	st := tc.ConnectionState()
	if len(st.PeerCertificates) == 0 || s.ln.cfg.UsesSASL() {
		return nil // Kafka: SSL without a client certificate is ANONYMOUS
	}
	p, err := s.ln.mapper.PrincipalFromTLS(st)
	if err != nil {
		return fmt.Errorf("ssl principal mapping: %w", err)
	}
	s.info.Principal = p
	return nil
}

// gate applies the SASL state machine to one client request. It returns
// handled=true when the gateway answered the request itself.
func (s *session) gate(req *Request) (handled bool, r Reason, err error) {
	a := &s.auth
	switch {
	case !a.needed:
		// Authenticated (or not a SASL listener). A new handshake is a
		// re-authentication (KIP-368), which Tollgate does not offer in
		// either mode — in pass-through it could bind the connection to
		// a principal Tollgate never saw: Kafka's answer is
		// ILLEGAL_SASL_STATE.
		if req.Key == int16(kmsg.SASLHandshake) || req.Key == int16(kmsg.SASLAuthenticate) {
			return s.illegalSASLState(req)
		}
		return false, "", nil
	case req.Key == int16(kmsg.ApiVersions):
		return false, "", nil // the filters may answer it (kafkaapi's ApiVersions cache)
	case req.Key == int16(kmsg.SASLHandshake):
		if s.ln.cfg.SASLMode() == SASLPassthrough && req.Version < 1 {
			return false, ReasonUnsupportedVers, errors.New("SaslHandshake v0 cannot be passed through (raw tokens have no frame the gateway can follow); use v1")
		}
		if s.ln.cfg.SASLMode() == SASLPassthrough { // v0 falls through to handshake, which refuses it
			hs, err := DecodeAs[*kmsg.SASLHandshakeRequest](req)
			if err != nil {
				return false, ReasonBadFrame, err
			}
			if !slices.Contains(s.ln.cfg.Mechanisms(), hs.Mechanism) {
				return s.unsupportedMechanism(req, hs.Mechanism)
			}
			a.mechanism, a.steps, a.user = hs.Mechanism, 0, ""
			return false, "", nil
		}
		return s.handshake(req)
	case req.Key == int16(kmsg.SASLAuthenticate):
		if a.mechanism == "" {
			return false, ReasonRefused, errors.New("SaslAuthenticate before SaslHandshake")
		}
		if s.ln.cfg.SASLMode() == SASLPassthrough {
			ar, err := DecodeAs[*kmsg.SASLAuthenticateRequest](req)
			if err != nil {
				return false, ReasonBadFrame, err
			}
			if a.steps == 0 {
				// The failed-login limit holds for the broker's
				// passwords too: an address over it is refused before
				// its first message reaches the broker.
				if err := s.gw.hooks.loginAllowed(&s.info, a.mechanism); err != nil {
					return s.loginFailed(req, err)
				}
			}
			if auth.CarriesIdentity(a.mechanism, a.steps, ar.SASLAuthBytes) {
				u, err := auth.PassthroughIdentity(a.mechanism, ar.SASLAuthBytes, s.ln.cfg.SASL.OAuthBearerSubClaimName)
				if err != nil {
					// Fail closed: never forwarded, never ANONYMOUS.
					return s.loginFailed(req, err)
				}
				a.user = u
			}
			a.waiting = make(chan brokerAnswer, 1)
			return false, "", nil
		}
		return s.authenticate(req)
	}
	return false, ReasonRefused, fmt.Errorf("%w: %s", errPreAuth, wire.Lookup(req.Key).Name)
}

// handshake answers SaslHandshake in terminate mode, v0 (raw tokens
// follow, see rawToken) and v1 (tokens in SaslAuthenticate). The response
// lists the enabled mechanisms, as Kafka's does.
func (s *session) handshake(req *Request) (bool, Reason, error) {
	hs, err := DecodeAs[*kmsg.SASLHandshakeRequest](req)
	if err != nil {
		return false, ReasonBadFrame, err
	}
	if !slices.Contains(s.ln.cfg.Mechanisms(), hs.Mechanism) || s.gw.creds == nil {
		return s.unsupportedMechanism(req, hs.Mechanism)
	}
	srv, err := auth.NewServer(hs.Mechanism, s.gw.creds)
	if err != nil {
		return s.unsupportedMechanism(req, hs.Mechanism)
	}
	if err := s.gw.hooks.loginAllowed(&s.info, hs.Mechanism); err != nil {
		srv = auth.Refused(hs.Mechanism, err) // its first step fails: loginFailed
	}
	s.auth.mechanism, s.auth.server = hs.Mechanism, srv
	// v0: the exchange that follows is raw tokens, each a size-prefixed
	// frame with no header, in both directions (see rawToken).
	s.auth.raw = req.Version == 0
	return s.handshakeAnswer(req, 0)
}

// unsupportedMechanism answers UNSUPPORTED_SASL_MECHANISM with the
// enabled mechanisms, then closes the connection, as Kafka does (the
// handshake failure is an AuthenticationException there).
func (s *session) unsupportedMechanism(req *Request, mechanism string) (bool, Reason, error) {
	s.handshakeAnswer(req, kerr.UnsupportedSaslMechanism.Code)
	return true, ReasonAuthFailed, fmt.Errorf("unsupported SASL mechanism %q", mechanism)
}

func (s *session) handshakeAnswer(req *Request, code int16) (bool, Reason, error) {
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.ErrorCode = code
	resp.SupportedMechanisms = s.ln.cfg.Mechanisms()
	resp.SetVersion(req.Version)
	s.respondLocal(req, wire.EncodeResponse(req.CorrelationID, false, resp))
	return true, "", nil
}

// authenticate answers one SaslAuthenticate step in terminate mode.
func (s *session) authenticate(req *Request) (bool, Reason, error) {
	ar, err := DecodeAs[*kmsg.SASLAuthenticateRequest](req)
	if err != nil {
		return false, ReasonBadFrame, err
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(req.Version)
	challenge, done, err := s.auth.server.Step(ar.SASLAuthBytes)
	if err != nil {
		return s.loginFailed(req, err)
	}
	resp.SASLAuthBytes = challenge
	if done {
		s.info.Credential = auth.Credential(s.auth.server)
		s.loggedIn(s.auth.server.Principal())
		s.gw.log.Info("authenticated", append(s.logAttrs(), "principal", s.info.Principal.String(), "mechanism", s.auth.mechanism)...)
	}
	s.respondLocal(req, wire.EncodeResponse(req.CorrelationID, req.Flexible, resp))
	return true, "", nil
}

// loggedIn binds the principal of a completed SASL login and lets
// requests flow.
func (s *session) loggedIn(p principal.Principal) {
	s.info.Principal = p
	s.auth.needed = false
	s.authDone.Store(true)
	if t := s.loginTimer.Load(); t != nil {
		t.Stop()
	}
}

// loginFailed answers a SaslAuthenticate that failed at the gateway with
// SASL_AUTHENTICATION_FAILED after Kafka's KIP-306 delay, counts and logs
// it, and closes the connection.
func (s *session) loginFailed(req *Request, err error) (bool, Reason, error) {
	s.gw.log.Warn("authentication failed", append(s.logAttrs(), "mechanism", s.auth.mechanism, "err", err.Error())...)
	s.gw.hooks.authFailed(&s.info, s.auth.mechanism, err)
	select {
	case <-time.After(s.ln.cfg.FailedAuthDelay()):
	case <-s.closed:
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(req.Version)
	resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
	resp.ErrorMessage = kmsg.StringPtr(auth.ClientMessage(err))
	s.respondLocal(req, wire.EncodeResponse(req.CorrelationID, req.Flexible, resp))
	return true, ReasonAuthFailed, err
}

// rawToken handles one raw SASL token frame after a v0 SaslHandshake: the
// payload is the token, the answer is the challenge as a size-prefixed
// frame (PLAIN's empty final one included), a failure closes the
// connection with no error frame, as Kafka does for v0.
func (s *session) rawToken(p []byte) (Reason, error) {
	challenge, done, err := s.auth.server.Step(p)
	if err != nil {
		s.gw.log.Warn("authentication failed", append(s.logAttrs(), "mechanism", s.auth.mechanism, "err", err.Error())...)
		s.gw.hooks.authFailed(&s.info, s.auth.mechanism, err)
		select {
		case <-time.After(s.ln.cfg.FailedAuthDelay()):
		case <-s.closed:
		}
		return ReasonAuthFailed, err
	}
	b := wire.GetBuffer(4 + len(challenge))
	binary.BigEndian.PutUint32(b.B, uint32(len(challenge)))
	copy(b.B[4:], challenge)
	if done {
		s.info.Credential = auth.Credential(s.auth.server)
		s.loggedIn(s.auth.server.Principal())
		s.auth.raw = false
		s.gw.log.Info("authenticated", append(s.logAttrs(), "principal", s.info.Principal.String(), "mechanism", s.auth.mechanism, "handshake", "v0")...)
	}
	s.mu.Lock()
	werr := s.writeClient(b.B)
	s.mu.Unlock()
	b.Release()
	if werr != nil {
		return writeReason(werr), werr
	}
	return "", nil
}

func (s *session) illegalSASLState(req *Request) (bool, Reason, error) {
	if req.Key == int16(kmsg.SASLHandshake) {
		return s.handshakeAnswer(req, kerr.IllegalSaslState.Code)
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(req.Version)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate request received after successful authentication")
	s.respondLocal(req, wire.EncodeResponse(req.CorrelationID, req.Flexible, resp))
	return true, "", nil
}

// passthroughResponse hands the broker's SaslAuthenticate answer in
// pass-through mode to the reader, which judges it (awaitPassthrough).
func (s *session) passthroughResponse(buf *wire.Buffer, pr *pending) {
	a := &s.auth
	if a.waiting == nil {
		return
	}
	var ans brokerAnswer
	defer func() { a.answer, a.answered = ans, true }()
	p := buf.B[4:]
	off, err := wire.ResponseBodyOffset(p, pr.req.Key, pr.req.Flexible)
	if err != nil {
		return
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(pr.req.Version)
	if resp.ReadFrom(p[off:]) != nil {
		return
	}
	if resp.ErrorCode != 0 {
		// The broker refused. Counted, audited and charged to the
		// address's failed-login limit like a login Tollgate refuses —
		// here, before the client reads the refusal, so that its next
		// attempt already meets the limit.
		s.gw.hooks.authFailed(&s.info, a.mechanism, fmt.Errorf("%w: the broker answered error %d", auth.ErrAuthenticationFailed, resp.ErrorCode))
	}
	// A copy: the decoded bytes alias the pooled buffer, which is reused
	// once the response is written, while the reader judges them.
	ans = brokerAnswer{code: resp.ErrorCode, bytes: bytes.Clone(resp.SASLAuthBytes), ok: true}
}

// signalPassthrough hands the answer passthroughResponse read to the
// reader (awaitPassthrough). Responder only.
func (s *session) signalPassthrough() {
	a := &s.auth
	if !a.answered {
		return
	}
	a.answered = false
	a.waiting <- a.answer
}

// awaitPassthrough waits, on the reader, for the broker's answer to a
// forwarded SaslAuthenticate, so that no later request is read before the
// session knows whether (and as whom) the client is authenticated. The
// login completes only when the broker's exchange has (auth.ExchangeComplete):
// an answer with error 0 alone is not a login — Kafka's OAUTHBEARER server
// answers an invalid token with error 0 and an error challenge.
func (s *session) awaitPassthrough() (Reason, error) {
	a := &s.auth
	if a.waiting == nil {
		return "", nil
	}
	var ans brokerAnswer
	select {
	case ans = <-a.waiting:
	case <-s.closed:
		return ReasonClientClosed, net.ErrClosed
	}
	a.waiting = nil
	step := a.steps
	a.steps++
	switch {
	case !ans.ok:
		return ReasonUpstreamProtocol, errors.New("the broker's SaslAuthenticate answer cannot be read")
	case ans.code != 0:
		return "", nil // the broker refused (counted as it passed); it closes the connection itself
	}
	complete, failed := auth.ExchangeComplete(a.mechanism, step, ans.bytes)
	switch {
	case failed:
		err := fmt.Errorf("%w: %s pass-through: the broker's answer at step %d does not continue the exchange", auth.ErrAuthenticationFailed, a.mechanism, step)
		s.gw.hooks.authFailed(&s.info, a.mechanism, err)
		return ReasonAuthFailed, err
	case !complete:
		return "", nil
	case a.user == "":
		err := fmt.Errorf("%w: no identity read for the completed %s login", auth.ErrNoIdentity, a.mechanism)
		s.gw.hooks.authFailed(&s.info, a.mechanism, err)
		return ReasonAuthFailed, err
	}
	s.loggedIn(principal.Principal{Type: "User", Name: a.user})
	s.gw.log.Info("authenticated (pass-through)", append(s.logAttrs(), "principal", s.info.Principal.String(), "mechanism", a.mechanism)...)
	return "", nil
}
