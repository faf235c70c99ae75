package proxy

import (
	"time"

	"github.com/tollgate/tollgate/internal/principal"
	"github.com/tollgate/tollgate/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
	// Payload is the frame after the size prefix. A Policy may patch it
	// in place (same length) to change what is forwarded. For a streamed
	// Produce (Size >= 64 KiB) it holds only the head of the frame: the
	// header and at least the first fields of the body.
	Payload []byte
	// BodyOffset is where the body starts in Payload.
	BodyOffset int
	// Received is when the frame was read.
	Received time.Time
	// Reserved is the Policy's own: a value it sets in Request and gets
	// back in Response or Dropped (e.g. quota reserved for this request).
	Reserved int64
}

// ExpectsResponse reports whether upstream will answer: everything but a
// Produce with acks=0.
func (r *Request) ExpectsResponse() bool { return r.Key != wire.KeyProduce || r.Acks != 0 }

// Verdict is a Policy's decision on a request.
type Verdict struct {
	// Respond, if non-nil, is answered locally instead of forwarding; the
	// gateway frames it with the request's correlation id and version.
	Respond kmsg.Response
	// Forward, if non-nil, is forwarded instead of the client's request,
	// with the same correlation id and client id (e.g. the request minus
	// the items the gateway refused).
	Forward kmsg.Request
	// Merge, if non-nil, edits the decoded upstream response before it is
	// written (e.g. to add back the items the gateway answered itself).
	Merge func(kmsg.Response)
	// Close closes the connection with this reason instead of forwarding.
	Close Reason
	// Hold delays forwarding the request this long (the session reads
	// nothing else meanwhile): a request for a throttled bucket waits for
	// the bucket's deadline, whichever connection it came on.
	Hold time.Duration
	// Throttle is a throttle the gateway decided at request time. For a
	// request without a response (acks=0 Produce) the connection is muted
	// for it once the request is forwarded; otherwise the response
	// carries at least this throttle and the connection is muted for it.
	Throttle time.Duration
}

// Policy sees every request and response of every session. The quota
// engine implements it; a nil Policy forwards everything unthrottled.
type Policy interface {
	// Request is called for each client request before it is forwarded.
	Request(c *principal.ConnInfo, r *Request) Verdict
	// Response is called for each upstream response before it is
	// written, with the response's size (after the size prefix; large
	// Fetch responses are streamed, so only the size is known). It returns
	// the gateway's throttle for this response: the response carries
	// max(this, upstream's), and the connection is muted for this long.
	Response(c *principal.ConnInfo, r *Request, size int) time.Duration
}

// Dropper is optionally implemented by a Policy that must hear about
// requests that were forwarded but will never get a response passed to
// Response, because their connection closed first.
type Dropper interface {
	Dropped(c *principal.ConnInfo, r *Request)
}

// Observer hears about connections opening and closing; metrics, logs and
// audit implement it.
type Observer interface {
	Opened(c *principal.ConnInfo)
	Closed(c *principal.ConnInfo, r Reason, err error)
}
