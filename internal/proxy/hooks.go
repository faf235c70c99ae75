package proxy

// Every optional hook the data path calls lives in this file: the filter
// hooks (what a filter of a connection's chain may do with requests and
// responses) and the observer hooks (connections opening and closing,
// failed logins, upstream connections). A filter or observer implements any
// of them; New refuses one that implements none, as franz-go's kgo does for
// its hooks, so a misspelt method is an error at start-up rather than a
// filter that silently never runs.

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/internal/accept"
	"github.com/tollgate/tollgate/internal/principal"
)

// RequestHook sees each client request of the keys its filter declares,
// before it is forwarded, in chain order. It may forward it (the zero
// Verdict), answer it, rewrite it, hold or throttle it, or close the
// connection: see Verdict and Chain for how the verdicts of several
// filters combine.
type RequestHook interface {
	OnRequest(c Conn, r *Request) Verdict
}

// ResponseHook sees each upstream response of the keys its filter
// declares that is read whole (every response but a Fetch of 64 KiB or
// more, which is streamed), in reverse chain order, before the throttle is
// applied. It may rewrite the response (Response.Edit) or return an error,
// which closes the connection as an upstream protocol error.
type ResponseHook interface {
	OnResponse(c Conn, r *Response) error
}

// ThrottleHook decides the gateway's throttle for each response of the
// keys its filter declares, streamed ones included, with the response's
// size (after the size prefix). The response carries the largest throttle
// of the chain and of the broker, and the connection is muted for the
// largest of the chain's (KIP-219).
type ThrottleHook interface {
	Throttle(c Conn, r *Request, size int) time.Duration
}

// LocalHook charges a request its filter saw that a later filter of the
// chain answered itself (Verdict.Respond), on the session's reader, with
// the time the gateway took to answer it (from the end of any hold to the
// answer): what the gateway answers is charged as the broker's answer
// would be. It returns the throttle the answer carries (the largest of the
// chain's), for which the connection is muted.
type LocalHook interface {
	AnsweredLocally(c Conn, r *Request, took time.Duration) time.Duration
}

// DropHook hears about a request its filter saw that will never reach
// ThrottleHook: its connection closed first, or a hold was cut short.
type DropHook interface {
	Dropped(c Conn, r *Request)
}

// OpenHook hears about a client connection that opened (after its TLS
// handshake, if any).
type OpenHook interface {
	Opened(c *principal.ConnInfo)
}

// CloseHook hears about a client connection that closed, and why. Logs,
// metrics and audit share the Reason.
type CloseHook interface {
	Closed(c *principal.ConnInfo, r Reason, err error)
}

// AuthFailHook hears about each failed SASL login (metrics count them,
// audit records them).
type AuthFailHook interface {
	AuthFailed(c *principal.ConnInfo, mechanism string, err error)
}

// LoginHook decides whether a SASL login the gateway terminates may start
// on a connection (at its SaslHandshake). A non-nil error refuses it
// without looking at any credential: the first SaslAuthenticate (or v0
// token) fails with that error, as any failed login does.
type LoginHook interface {
	LoginAllowed(c *principal.ConnInfo, mechanism string) error
}

// UpstreamHook hears about each upstream connection the gateway opens (one
// per client connection that forwards a request; none for one that never
// does).
type UpstreamHook interface {
	UpstreamOpened(c *principal.ConnInfo)
}

// ServeHook hears about every request the gateway's filters answered or
// the broker answered, once the answer is written — or, for a Produce with
// acks=0, once it is forwarded (respSize 0) — with the throttle the client
// was given. Usage accounting implements it. It is called on the
// session's goroutines, per request: it must not block.
type ServeHook interface {
	Served(c *principal.ConnInfo, r *Request, respSize int, throttle time.Duration)
}

// RefusalHook hears about each connection admission refused, by the Kafka
// setting that refused it.
type RefusalHook = accept.RefusalHook

// filterHooks reports whether f implements at least one filter hook.
func filterHooks(f any) bool {
	switch f.(type) {
	case RequestHook, ResponseHook, ThrottleHook, DropHook, LocalHook:
		return true
	}
	return false
}

// observerHooks reports whether h implements at least one observer hook.
func observerHooks(h any) bool {
	switch h.(type) {
	case OpenHook, CloseHook, AuthFailHook, LoginHook, UpstreamHook, RefusalHook, ServeHook:
		return true
	}
	return false
}

// hooks holds a gateway's observers by the hooks they implement.
type hooks struct {
	open     []OpenHook
	close    []CloseHook
	authFail []AuthFailHook
	login    []LoginHook
	upstream []UpstreamHook
	refused  []RefusalHook
	serve    []ServeHook
}

func (h *hooks) add(x any) error {
	if !observerHooks(x) {
		return fmt.Errorf("proxy: hook %T implements none of the observer hooks (Opened, Closed, AuthFailed, LoginAllowed, UpstreamOpened, Refused, Served)", x)
	}
	addHook(x, &h.open)
	addHook(x, &h.close)
	addHook(x, &h.authFail)
	addHook(x, &h.login)
	addHook(x, &h.upstream)
	addHook(x, &h.refused)
	addHook(x, &h.serve)
	return nil
}

// Refused implements accept.RefusalHook for every refusal hook.
func (h *hooks) Refused(listener, reason string) {
	for _, o := range h.refused {
		o.Refused(listener, reason)
	}
}

func (h *hooks) opened(c *principal.ConnInfo) {
	for _, o := range h.open {
		o.Opened(c)
	}
}

func (h *hooks) closed(c *principal.ConnInfo, r Reason, err error) {
	for _, o := range h.close {
		o.Closed(c, r, err)
	}
}

func (h *hooks) authFailed(c *principal.ConnInfo, mechanism string, err error) {
	for _, o := range h.authFail {
		o.AuthFailed(c, mechanism, err)
	}
}

func (h *hooks) loginAllowed(c *principal.ConnInfo, mechanism string) error {
	for _, o := range h.login {
		if err := o.LoginAllowed(c, mechanism); err != nil {
			return err
		}
	}
	return nil
}

func (h *hooks) upstreamOpened(c *principal.ConnInfo) {
	for _, o := range h.upstream {
		o.UpstreamOpened(c)
	}
}

func (h *hooks) served(c *principal.ConnInfo, r *Request, respSize int, throttle time.Duration) {
	for _, o := range h.serve {
		o.Served(c, r, respSize, throttle)
	}
}

// addHook appends x to list if it implements the list's hook.
func addHook[H any](x any, list *[]H) {
	if o, ok := x.(H); ok {
		*list = append(*list, o)
	}
}
