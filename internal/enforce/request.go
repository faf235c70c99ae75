package enforce

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tollgate/tollgate/internal/proxy"
	"github.com/tollgate/tollgate/internal/wire"
)

// request_percentage (KIP-124): every request the filter sees is charged
// the upstream's time for it (quota.RequestMeter says how it is measured),
// and every response of a client over its quota is throttled, bounded by
// one quota window, as Kafka's ClientRequestQuotaManager does. Produce,
// Fetch and the mutations carry the larger of that throttle and their own.

// exempt reports whether Kafka never charges key to the request quota at a
// client listener. SaslHandshake and SaslAuthenticate are answered by
// Kafka's network layer (the login and KIP-368 re-authentication) before a
// request handler sees anything, and so is ApiVersions before a login; the
// gateway answers ApiVersions from its cache. Leaving them out of Keys also
// keeps a connection that has sent nothing else free of per-connection
// state. A Produce with acks=0, which Kafka records as exempt, has no
// response and so never reaches Throttle.
//
// Kafka also exempts what brokers and controllers send each other (cluster
// actions from a principal allowed ClusterAction, Envelope, follower
// fetches). None of that passes a gateway; a client that sends one is
// charged, as Kafka charges a cluster action it refuses.
func exempt(key int16) bool {
	return key == int16(kmsg.SASLHandshake) || key == int16(kmsg.SASLAuthenticate) || key == int16(kmsg.ApiVersions)
}

// allKeys is Keys: every key kmsg knows but the exempt ones.
var allKeys = func() []int16 {
	var ks []int16
	for k := int16(0); k <= wire.MaxKey; k++ {
		if kmsg.RequestForKey(k) != nil && !exempt(k) {
			ks = append(ks, k)
		}
	}
	return ks
}()

// ByContent lists the API keys the filter reads, and may rewrite or
// answer, by their content: the byte rates, the mutations, and JoinGroup's
// rebalance wait (request and answer). Every other key of Keys is only timed for the request
// quota.
func (f *Filter) ByContent() []int16 {
	return []int16{int16(kmsg.Produce), int16(kmsg.Fetch), int16(kmsg.JoinGroup), int16(kmsg.CreateTopics), int16(kmsg.DeleteTopics),
		int16(kmsg.CreatePartitions), int16(kmsg.ShareFetch)}
}

// A request's Reserved carries two things from OnRequest to Throttle or
// Dropped: the low 32 bits are what a byte rate reserved for it (a fetch's
// clamp, a produce's size: both below 2³¹), the bits above are how long,
// in ms, the request lets the broker wait before answering.
const reservedMask = 1<<32 - 1

func reservation(r *proxy.Request) int64 { return r.Reserved & reservedMask }

func setReservation(r *proxy.Request, v int64) {
	r.Reserved = r.Reserved&^reservedMask | v&reservedMask
}

func allowedWait(r *proxy.Request) time.Duration {
	return time.Duration(r.Reserved>>32) * time.Millisecond
}

func setWait(r *proxy.Request, ms int32) {
	r.Reserved = r.Reserved&reservedMask | int64(max(ms, 0))<<32
}

// noteWait records how long the request lets the broker wait before
// answering, which is not charged as the broker's work: where Kafka parks a
// request in a purgatory, the gateway cannot tell the parking from the
// work. ShareFetch's is noted where the filter decodes it (shareFetch).
//
//   - Fetch: max_wait_ms, if min_bytes > 0 (with min_bytes ≤ 0 the broker
//     answers at once, so an empty fetch cannot hide behind a long
//     max_wait_ms).
//   - Produce with acks=all: timeout_ms, the wait for the replicas (acks=1
//     is answered once the leader has written).
//   - JoinGroup: the rebalance (rebalance_timeout_ms; session_timeout_ms at
//     v0), unless it is answered with an error (OnResponse): then the
//     coordinator answered at once (a new member sent back for its member
//     id, an unknown member), and a bogus member id with a huge timeout
//     buys nothing.
func noteWait(r *proxy.Request) {
	switch r.Key {
	case int16(kmsg.Fetch):
		if mb, ok := wire.FetchMinBytes(r.Payload, r.BodyOffset, r.Version); ok && mb > 0 {
			setWait(r, int32(min(r.MaxWait.Milliseconds(), 1<<31-1)))
		}
	case int16(kmsg.Produce):
		if r.Acks == -1 {
			setWait(r, int32(min(r.MaxWait.Milliseconds(), 1<<31-1)))
		}
	case int16(kmsg.JoinGroup):
		jg, err := proxy.DecodeAs[*kmsg.JoinGroupRequest](r)
		if err != nil {
			return // the broker will say what is wrong with it
		}
		if r.Version == 0 {
			setWait(r, jg.SessionTimeoutMillis)
		} else {
			setWait(r, jg.RebalanceTimeoutMillis)
		}
	}
}

// OnResponse implements proxy.ResponseHook: a JoinGroup answered with an
// error did not wait for its group, so it is charged all its time (see
// noteWait). With per-topic quotas, a Fetch answer read whole is charged
// per topic and a Metadata answer's topic ids are learnt (topic.go). Every
// answer passes untouched.
func (q *conn) OnResponse(c proxy.Conn, r *proxy.Response) error {
	switch r.Req.Key {
	case int16(kmsg.Fetch):
		q.fetchResponseTopics(c, r) // per-topic quotas (topic.go)
		return nil
	case int16(kmsg.ShareFetch):
		q.shareFetchResponseTopics(c, r) // per-topic quotas (topic.go)
		return nil
	case int16(kmsg.Metadata):
		q.learnTopicIDs(r) // per-topic quotas: topics named by id
		return nil
	}
	if r.Req.Key != int16(kmsg.JoinGroup) || allowedWait(r.Req) == 0 {
		return nil
	}
	if resp, ok := r.Decode(); !ok || resp.(*kmsg.JoinGroupResponse).ErrorCode != 0 {
		setWait(r.Req, 0)
	}
	return nil
}

// OnResponse implements proxy.ResponseHook.
func (f *Filter) OnResponse(c proxy.Conn, r *proxy.Response) error {
	return connFor(f).OnResponse(c, r)
}
