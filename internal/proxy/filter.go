package proxy

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/wire"
)

// A connection opens a chain of filters (Kroxylicious' model). Each filter
// declares the API keys it sees and implements one or more of the hooks in
// hooks.go: it may forward a request, answer it, rewrite it or its
// response, hold or throttle it, or close the connection. The chain's order
// is declared in one place, by whoever builds the gateway (kafkaapi.Chain):
// requests pass the filters first to last, responses last to first, as
// layers around the broker.

// Filter is one link of the chain.
type Filter interface {
	// Name names the filter in logs and errors.
	Name() string
	// Keys lists the API keys the filter sees; nil means every key.
	Keys() []int16
}

// ConnFilter is implemented by a filter that keeps state per connection:
// each connection gets its own instance from ForConn, which must implement
// the same hooks. A filter without it is shared by every connection.
type ConnFilter interface {
	ForConn(c Conn) Filter
}

// Chain is the ordered list of filters every connection opens.
type Chain []Filter

// Conn is what a filter knows of its connection.
type Conn interface {
	// Info is who is connected, from where, on which listener and port.
	// The principal changes once, when a SASL login completes.
	Info() *principal.ConnInfo
	// Authenticated reports whether requests may flow: true on a listener
	// without SASL, and on a SASL listener once the login completed.
	Authenticated() bool
	// Listener is the listener's configuration.
	Listener() *ListenerConfig
	// Mapper gives the addresses clients of this listener dial for each
	// broker (opening a broker's port when it is new).
	Mapper() wire.Mapper
	// BrokerAddress is this listener's address for node id, if its port
	// is open (it is not opened).
	BrokerAddress(id int32) (host string, port int32, ok bool)
	// ClusterID is the upstream cluster id from the last metadata refresh.
	ClusterID() (string, bool)
	// Dialed reports whether the session has opened its upstream
	// connection (at its first forwarded request).
	Dialed() bool
}

// Request is what the data path knows of one client request. It is valid
// during the hook call only.
type Request struct {
	Key, Version  int16
	CorrelationID int32
	// ClientID is the header's client id ("" for null). The string is
	// reused across requests of a connection that keep the same id.
	ClientID string
	// Size is the whole request size as Kafka's quotas count it: header
	// and body, everything after the 4-byte size prefix.
	Size int
	// Acks is the Produce acks (meaningful for Key 0 only).
	Acks int16
	// Flexible is whether the request's header (and its response's) is
	// the flexible one.
	Flexible bool
	// Payload is the frame after the size prefix. A filter may patch it
	// in place (same length) to change what is forwarded. For a streamed
	// Produce (Size >= 64 KiB) it holds only the head of the frame: the
	// header and at least the first fields of the body.
	Payload []byte
	// BodyOffset is where the body starts in Payload.
	BodyOffset int
	// Received is when the frame was read.
	Received time.Time
	// Reserved is a value the quota filter keeps with the request (what
	// it reserved for it) and gets back in Throttle or Dropped. One filter
	// of a chain may use it.
	Reserved int64

	// MaxWait is how long the request itself lets the broker wait before
	// answering: a Fetch's or ShareFetch's max_wait_ms (the long poll), a
	// Produce's timeout_ms (replication). Set when the request is read
	// (ShareFetch: when it is forwarded).
	MaxWait time.Duration
	// Forwarded is when the request was forwarded upstream (zero for one
	// answered by the gateway): with the time its response passes, the
	// time the upstream took to answer it.
	Forwarded time.Time
	// Shared is what a filter looked up about the request, kept for the
	// later filters and for the response hooks, so that nothing is asked
	// twice (a mutation request's partition counts, enforce.Mutations:
	// the quota and the usage ledger count the same partitions from one
	// Metadata round trip). Nil at the start of each request; one kind of
	// value per API key.
	Shared any

	decoded kmsg.Request // Decode's result, shared by the chain
}

// ExpectsResponse reports whether upstream will answer: everything but a
// Produce with acks=0.
func (r *Request) ExpectsResponse() bool { return r.Key != int16(kmsg.Produce) || r.Acks != 0 }

// Decode decodes the request body with kmsg, once per request: every
// filter of the chain shares the result (and may change it to forward it,
// see Verdict.Forward). Only requests a filter must read are decoded;
// Produce and Fetch are read in place by the wire package instead. A body
// kmsg cannot read is wire.ErrMalformed (the connection closes).
func (r *Request) Decode() (kmsg.Request, error) {
	if r.decoded != nil {
		return r.decoded, nil
	}
	kr := kmsg.RequestForKey(r.Key)
	if kr == nil || r.BodyOffset > len(r.Payload) {
		return nil, fmt.Errorf("%w: %s v%d request", wire.ErrMalformed, kmsg.NameForKey(r.Key), r.Version)
	}
	kr.SetVersion(r.Version)
	if err := kr.ReadFrom(r.Payload[r.BodyOffset:]); err != nil {
		return nil, fmt.Errorf("%w: %s v%d request: %v", wire.ErrMalformed, kmsg.NameForKey(r.Key), r.Version, err)
	}
	r.decoded = kr
	return kr, nil
}

// DecodeAs is Decode as the request type of r's key.
func DecodeAs[T kmsg.Request](r *Request) (T, error) {
	var zero T
	kr, err := r.Decode()
	if err != nil {
		return zero, err
	}
	t, ok := kr.(T)
	if !ok {
		return zero, fmt.Errorf("%w: %s is not a %T", wire.ErrMalformed, kmsg.NameForKey(r.Key), zero)
	}
	return t, nil
}

// Verdict is a filter's decision on a request. The zero Verdict forwards it
// unchanged. The verdicts of a chain combine in chain order: the first
// Close or Respond ends the chain (later filters do not see the request);
// Hold and Throttle take the largest; Merge functions compose, the later
// filter's applied first (it is nearer the broker), and a Respond gets the
// Merges of the filters before it (for them, the local answer is the
// upstream's); at most one filter may Forward a rewritten request (a
// second closes the connection: it is a bug in the chain) — unless it
// forwards the same request, Request.Decode's shared result, which each
// filter edited in turn.
type Verdict struct {
	// Respond, if non-nil, is answered locally instead of forwarding; the
	// gateway frames it with the request's correlation id and version.
	Respond kmsg.Response
	// Forward, if non-nil, is forwarded instead of the client's request,
	// with the same correlation id and client id (e.g. the request minus
	// the items the gateway answered itself).
	Forward kmsg.Request
	// Topics, for a streamed Produce (Request.Payload holds only its
	// head), sees each topic the request names — its name, or its id
	// from v13 — as the frame is forwarded, before any byte of that topic
	// is written upstream; the records are still copied socket to socket.
	// false ends the request: the broker has received only part of the
	// frame, which it never handles, so the session closes
	// (ReasonRefused). For a filter that must know every topic of a
	// Produce whose later topics lie past the head. For a Fetch whose
	// response is streamed (64 KiB or more), it sees each topic of the
	// response before any byte of that topic is written to the client;
	// false closes the session (ReasonRefused): what a broker's fetch
	// session sends of a topic no request names again. Ignored for any
	// other request; at most one filter of a chain may set it.
	Topics func(name []byte, id [16]byte) bool
	// TopicBytes sees each topic's record bytes (the sum of its
	// partitions' records lengths) where the filter cannot read them
	// itself: for a streamed Produce (Request.Payload holds only its
	// head), as the frame is forwarded, once the topic's records are
	// written; for a Fetch whose response is streamed (64 KiB or more),
	// as the response passes, after its throttle_time_ms was written. The
	// topic is its name, or its id (name nil) where the version names
	// topics by id; name is valid during the call only. A request or
	// response read whole is not shown (the filter reads Payload, or the
	// response in OnResponse). Per-topic quotas set it; at most one filter
	// of a chain may.
	TopicBytes func(name []byte, id [16]byte, bytes int)
	// Merge, if non-nil, edits the decoded upstream response before the
	// response hooks see it (e.g. to add back the items the gateway
	// answered itself).
	Merge func(kmsg.Response)
	// Close closes the connection with this reason instead of forwarding.
	Close Reason
	// Hold delays forwarding the request this long (the session reads
	// nothing else meanwhile): a request for a throttled bucket waits for
	// the bucket's deadline, whichever connection it came on.
	Hold time.Duration
	// Replay, with Respond, also sends the client's request upstream when
	// the session's upstream connection opens, before anything else, its
	// answer passing the response hooks but not written to the client: an
	// ApiVersions answered from a cache so that an idle client holds no
	// upstream connection still tells the broker the client's KIP-511
	// software name and version.
	Replay bool
	// Throttle is a throttle the gateway decided at request time. For a
	// request without a response (acks=0 Produce) the connection is muted
	// for it once the request is forwarded; otherwise the response
	// carries at least this throttle and the connection is muted for it.
	Throttle time.Duration
}

// combine adds the verdict of the chain's next filter to v, as Verdict
// says. stop: fv ends the chain, because it closes or answers, or because
// it conflicts with an earlier filter's (bug says how; the caller closes
// the connection).
func (v *Verdict) combine(fv Verdict) (stop bool, bug error) {
	v.Hold = max(v.Hold, fv.Hold)
	v.Throttle = max(v.Throttle, fv.Throttle)
	if fv.Close != "" {
		v.Close = fv.Close
		return true, nil
	}
	if fv.Forward != nil {
		if v.Forward != nil && v.Forward != fv.Forward {
			return true, errTwoForwards
		}
		v.Forward = fv.Forward
	}
	if fv.Topics != nil {
		if v.Topics != nil {
			return true, errTwoTopicChecks
		}
		v.Topics = fv.Topics
	}
	if fv.TopicBytes != nil {
		if v.TopicBytes != nil {
			return true, errTwoTopicBytes
		}
		v.TopicBytes = fv.TopicBytes
	}
	if fv.Merge != nil {
		if v.Merge == nil {
			v.Merge = fv.Merge
		} else {
			outer, inner := v.Merge, fv.Merge
			v.Merge = func(r kmsg.Response) { inner(r); outer(r) }
		}
	}
	if fv.Respond != nil {
		v.Respond, v.Replay = fv.Respond, fv.Replay
		return true, nil
	}
	return false, nil
}

// Response is an upstream response read whole, as response hooks see it.
// It is valid during the hook call only.
type Response struct {
	// Req is the request it answers (its Payload is gone; Shared is
	// kept).
	Req *Request
	// Buf is the frame, size prefix included. Hooks rewrite it through
	// Edit, or in place with the wire package's functions.
	Buf *wire.Buffer
}

// Edit decodes the response at its version, lets fn change it, and
// re-encodes it in place of the original.
func (r *Response) Edit(fn func(kmsg.Response)) error {
	return wire.Edit(r.Buf, r.Req.Key, r.Req.Version, r.Req.Flexible, fn)
}

// Decode decodes the response at its version, for a hook that only reads
// it; false if kmsg cannot read it.
func (r *Response) Decode() (kmsg.Response, bool) {
	p := r.Buf.B[4:]
	off, err := wire.ResponseBodyOffset(p, r.Req.Key, r.Req.Flexible)
	if err != nil {
		return nil, false
	}
	resp := kmsg.ResponseForKey(r.Req.Key)
	resp.SetVersion(r.Req.Version)
	if resp.ReadFrom(p[off:]) != nil {
		return nil, false
	}
	return resp, true
}

// chain is a gateway's filters with, per API key, which of them see it
// with which hook. The per-frame path reads these tables only.
type chain struct {
	filters Chain
	perConn bool // some filter is a ConnFilter
	// needsConn says which keys reach a ConnFilter (any hook): the
	// session makes its per-connection instances before the first such
	// request, so a connection that never sends one holds none.
	needsConn [wire.MaxKey + 1]bool
	request   [wire.MaxKey + 1][]int
	response  [wire.MaxKey + 1][]int // in reverse chain order
	throttle  [wire.MaxKey + 1][]int
	drop      [wire.MaxKey + 1][]int
	local     [wire.MaxKey + 1][]int
}

func newChain(fs Chain) (*chain, error) {
	c := &chain{filters: fs}
	for i, f := range fs {
		if f == nil {
			return nil, fmt.Errorf("proxy: filter %d of the chain is nil", i)
		}
		if !filterHooks(f) {
			return nil, fmt.Errorf("proxy: filter %s (%T) implements none of the filter hooks (OnRequest, OnResponse, Throttle, Dropped)", f.Name(), f)
		}
		_, perConn := f.(ConnFilter)
		c.perConn = c.perConn || perConn
		keys := f.Keys()
		if keys == nil {
			for k := int16(0); k <= wire.MaxKey; k++ {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			if k < 0 || k > wire.MaxKey {
				return nil, fmt.Errorf("proxy: filter %s declares API key %d, which kmsg does not know", f.Name(), k)
			}
			c.needsConn[k] = c.needsConn[k] || perConn
			if _, ok := f.(RequestHook); ok {
				c.request[k] = append(c.request[k], i)
			}
			if _, ok := f.(ResponseHook); ok {
				c.response[k] = append([]int{i}, c.response[k]...)
			}
			if _, ok := f.(ThrottleHook); ok {
				c.throttle[k] = append(c.throttle[k], i)
			}
			if _, ok := f.(DropHook); ok {
				c.drop[k] = append(c.drop[k], i)
			}
			if _, ok := f.(LocalHook); ok {
				c.local[k] = append(c.local[k], i)
			}
		}
	}
	return c, nil
}

// forConn returns the filters of one connection: the chain itself when no
// filter keeps per-connection state.
func (c *chain) forConn(conn Conn) []Filter {
	if !c.perConn {
		return c.filters
	}
	fs := make([]Filter, len(c.filters))
	for i, f := range c.filters {
		if cf, ok := f.(ConnFilter); ok {
			fs[i] = cf.ForConn(conn)
		} else {
			fs[i] = f
		}
	}
	return fs
}

// errTwoForwards is a chain in which two filters rewrote one request.
var errTwoForwards = fmt.Errorf("two filters rewrote the same request")

// errTwoTopicChecks is a chain in which two filters set Verdict.Topics.
var errTwoTopicChecks = fmt.Errorf("two filters check the topics of the same streamed Produce")

// errTwoTopicBytes is a chain in which two filters set Verdict.TopicBytes.
var errTwoTopicBytes = fmt.Errorf("two filters count the topic bytes of the same request")
