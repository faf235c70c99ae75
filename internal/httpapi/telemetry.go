package httpapi

import (
	"net/http"
	"time"

	"github.com/tollgate/tollgate/internal/quota"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/telemetry"
)

// EndpointTelemetry is the clients' own view (KIP-714) next to Tollgate's.
const EndpointTelemetry = "/api/v1/telemetry"

// TelemetryClient is one (user, client-id) series: what its clients
// pushed about themselves, next to what Tollgate's quota buckets saw of
// the same user and client-id.
type TelemetryClient struct {
	User     string `json:"user"`
	ClientID string `json:"client_id"`
	// Instances is how many client instances' last pushes are combined
	// (averages by their mean, maxima by the largest).
	Instances int    `json:"instances"`
	LastPush  string `json:"last_push"`
	// Reported are the chosen metrics the clients pushed, in
	// milliseconds, by name (produce_throttle_time_avg_ms, ...); absent
	// when not pushed.
	Reported map[string]float64 `json:"reported"`
	// Subscriptions are the client-metrics subscriptions (CLIENT_METRICS
	// resources, kafka-client-metrics) matched to its instances, by name;
	// absent when none is.
	Subscriptions []string `json:"subscriptions,omitempty"`
	// Tollgate is Tollgate's own view of the same user and client-id: the
	// byte-rate and request quotas that apply and their buckets.
	Tollgate []TelemetryBucket `json:"tollgate"`
}

// TelemetryBucket is the quota bucket a client's requests are charged to
// for one quota key: its rate against the quota and the throttles it
// imposed (since the bucket was made).
type TelemetryBucket struct {
	Quota          string   `json:"quota"`
	Level          string   `json:"level"`
	Limit          *float64 `json:"limit"`
	Rate           float64  `json:"rate"`
	Utilization    float64  `json:"utilization"`
	BucketUser     string   `json:"bucket_user"`
	BucketClientID string   `json:"bucket_client_id"`
	BucketPrefix   string   `json:"bucket_client_id_prefix,omitempty"`
	Shadow         bool     `json:"shadow,omitempty"`
	Throttled      int64    `json:"throttled"`
	ThrottleMs     int64    `json:"throttle_ms_total"`
}

// telemetryKeys are the quotas shown next to the clients' own throttle
// times: those that throttle produce and fetch requests.
var telemetryKeys = []model.Key{model.ProducerByteRate, model.ConsumerByteRate, model.RequestPercentage}

type bucketKey struct {
	key            model.Key
	user, client   string
	clientIsPrefix bool
}

// telemetry answers GET /api/v1/telemetry: the subscription clients are
// given, the bounds, and every live series with Tollgate's view of it,
// most recently pushed first. It needs the read right, as every /api/v1
// read does.
func (s Sources) telemetry(w http.ResponseWriter, r *http.Request) {
	if s.Telemetry == nil {
		fail(w, http.StatusServiceUnavailable, "the clients' telemetry is off (telemetry.enabled: false)")
		return
	}
	now := s.Now()
	series := s.Telemetry.Series(now)
	st := s.Telemetry.Stats(now)
	var buckets map[bucketKey]quota.Usage
	if s.Engine != nil {
		buckets = map[bucketKey]quota.Usage{}
		for _, u := range s.Engine.Usage(now) {
			buckets[bucketKey{u.Key, u.User, u.ClientID, u.ClientIDPrefix}] = u
		}
	}
	clients := make([]TelemetryClient, 0, len(series))
	for _, sr := range series {
		c := TelemetryClient{User: sr.User, ClientID: sr.ClientID, Instances: sr.Instances,
			LastPush: sr.LastPush.UTC().Format(time.RFC3339Nano), Reported: map[string]float64{}, Tollgate: []TelemetryBucket{},
			Subscriptions: sr.Subscriptions}
		for m := telemetry.Metric(0); m < telemetry.NumMetrics; m++ {
			if v, ok := sr.Values.Get(m); ok {
				c.Reported[m.String()] = v
			}
		}
		if s.Engine != nil {
			for _, k := range telemetryKeys {
				res := s.Engine.Resolve(k, sr.User, sr.ClientID, now)
				if !res.Limited() {
					continue
				}
				b := TelemetryBucket{Quota: k.String(), Level: res.Level.String(), Limit: num(res.Quota),
					Rate: res.Rate, Utilization: res.Utilization, BucketUser: res.UserTag, BucketClientID: res.ClientTag,
					Shadow: res.Options.Shadow}
				if res.ClientPrefix {
					b.BucketClientID, b.BucketPrefix = "", res.ClientTag
				}
				if u, ok := buckets[bucketKey{k, res.UserTag, res.ClientTag, res.ClientPrefix}]; ok {
					b.Throttled, b.ThrottleMs = u.Throttles, u.ThrottleTotal.Milliseconds()
				}
				c.Tollgate = append(c.Tollgate, b)
			}
		}
		clients = append(clients, c)
	}
	sub := s.Telemetry.Subscription()
	writeJSON(w, http.StatusOK, map[string]any{
		"subscription": map[string]any{
			"push_interval_ms": sub.PushInterval.Milliseconds(),
			"metrics":          sub.Metrics,
		},
		"client_subscriptions": len(s.Telemetry.ClientSubscriptions()),
		"series":               st.Series,
		"max_series":           s.Telemetry.MaxSeries(),
		"client_instances":     st.ClientInstances,
		"evictions":            map[string]uint64{"series": st.EvictedSeries, "client_instance": st.EvictedInstances},
		"clients":              clients,
	})
}
