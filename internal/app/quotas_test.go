package app

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/quota/model"
	"github.com/tollgate/tollgate/internal/store"
)

func sptr(s string) *string   { return &s }
func fptr(f float64) *float64 { return &f }

// The file's client-id prefixes and shadow marks reach the engine's input
// the same way the Kafka API's do (fileEntities → control.BuildFrom), and
// buildQuotas refuses what AlterClientQuotas refuses.
func TestFileQuotaModel(t *testing.T) {
	entries := []QuotaEntry{
		{ClientIDPrefix: sptr("etl-"), ConsumerByteRate: fptr(2048), Shadow: true},
		{User: sptr("alice"), ProducerByteRate: fptr(1024)},
		{User: sptr("bob"), ProducerByteRate: fptr(1024), BurstSeconds: fptr(0)},
	}
	if _, err := buildQuotas(entries); err != nil {
		t.Fatal(err)
	}
	fe := fileEntities(entries)
	var prefix store.EntityQuotas
	for _, e := range fe {
		if e.Entity.Has(store.TypeClientIDPrefix) {
			prefix = e
		}
	}
	if prefix.Values["consumer_byte_rate"] != 2048 || prefix.Values[control.KeyShadow] != 1 {
		t.Fatalf("prefix entity %+v", prefix)
	}
	q, _, err := control.BuildFrom(fe)
	if err != nil {
		t.Fatal(err)
	}
	r := q.Resolve(model.ConsumerByteRate, "bob", "etl-7")
	if r.Entity != model.ClientPrefixEntity("etl-") || !r.Options.Shadow || r.Quota != 2048 {
		t.Errorf("etl-7: %+v", r)
	}
	if r := q.Resolve(model.ProducerByteRate, "alice", "etl-7"); r.Options.Shadow || r.Options.HasBurst {
		t.Errorf("alice's quota has no options: %+v", r)
	}
	if r := q.Resolve(model.ProducerByteRate, "bob", "x"); !r.Options.HasBurst || r.Options.Burst != 0 {
		t.Errorf("bob's burst 0: %+v", r)
	}

	for _, tc := range []struct {
		e    QuotaEntry
		want string
	}{
		{QuotaEntry{ClientIDPrefix: sptr(""), ProducerByteRate: fptr(1)}, "Empty client-id-prefix not supported"},
		{QuotaEntry{ClientIDPrefix: sptr("p"), User: sptr("u"), ProducerByteRate: fptr(1)}, "a client-id-prefix entity stands alone"},
		{QuotaEntry{ClientIDPrefix: sptr("p"), DefaultClientID: true, ProducerByteRate: fptr(1)}, "a client-id-prefix entity stands alone"},
		{QuotaEntry{ClientIDPrefix: sptr("p"), IP: sptr("1.2.3.4"), ConnectionCreationRate: fptr(1)}, "a client-id-prefix entity stands alone"},
		{QuotaEntry{User: sptr("u"), IP: sptr("1.2.3.4"), ConnectionCreationRate: fptr(1)}, "IP entity shouldnot be combined with User or ClientId"},
		{QuotaEntry{User: sptr(""), ProducerByteRate: fptr(1)}, "Empty user not supported"},
		{QuotaEntry{User: sptr("u"), DefaultUser: true, ProducerByteRate: fptr(1)}, "user and default_user are exclusive"},
		{QuotaEntry{ProducerByteRate: fptr(1)}, "Invalid empty client quota entity"},
		{QuotaEntry{IP: sptr("1.2.3.4"), ConnectionCreationRate: fptr(1.5)}, "connection_creation_rate cannot be a fractional value."},
		{QuotaEntry{IP: sptr("10.1.2.3/8"), ConnectionCreationRate: fptr(1)}, "10.1.2.3/8 has host bits set; did you mean 10.0.0.0/8?"},
		{QuotaEntry{IP: sptr("1.2.3.4"), ProducerByteRate: fptr(1)}, "Invalid configuration key producer_byte_rate"},
		{QuotaEntry{IP: sptr("1.2.3.4"), ConnectionCreationRate: fptr(1), Shadow: true}, "Invalid configuration key shadow"},
		{QuotaEntry{User: sptr("u"), Shadow: true}, "no quota key set"},
		{QuotaEntry{User: sptr("u"), ProducerByteRate: fptr(1), BurstSeconds: fptr(-1)}, "Quota burst_seconds must be from 0 to 3600"},
		{QuotaEntry{User: sptr("u"), ProducerByteRate: fptr(1), BurstSeconds: fptr(4000)}, "Quota burst_seconds must be from 0 to 3600"},
		{QuotaEntry{IP: sptr("1.2.3.4"), ConnectionCreationRate: fptr(1), BurstSeconds: fptr(1)}, "Invalid configuration key burst_seconds"},
	} {
		_, err := buildQuotas([]QuotaEntry{tc.e})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.e, err, tc.want)
		}
	}
}

// The file's per-topic entries (topic, topic_prefix) reach the engine's
// input as the Kafka API's do, and buildQuotas refuses what
// AlterClientQuotas refuses.
func TestFileTopicQuotas(t *testing.T) {
	entries := []QuotaEntry{
		{Topic: sptr("orders"), ProducerByteRate: fptr(1000)},
		{User: sptr("alice"), TopicPrefix: sptr("logs-"), ConsumerByteRate: fptr(2000), Shadow: true},
		{ClientIDPrefix: sptr("etl-"), Topic: sptr("orders"), ProducerByteRate: fptr(3000), BurstSeconds: fptr(0)},
		{DefaultUser: true, Topic: sptr("orders"), ConsumerByteRate: fptr(4000)},
		{User: sptr("alice"), ProducerByteRate: fptr(5000)},
	}
	if _, err := buildQuotas(entries); err != nil {
		t.Fatal(err)
	}
	q, _, err := control.BuildFrom(fileEntities(entries))
	if err != nil {
		t.Fatal(err)
	}
	orders := model.Exact("orders")
	for _, c := range []struct {
		k                   model.Key
		user, client, topic string
		want                model.Entity
		v                   float64
	}{
		{model.ProducerByteRate, "bob", "web", "orders", model.TopicEntity(model.Entity{}, orders), 1000},
		{model.ProducerByteRate, "bob", "etl-1", "orders", model.TopicEntity(model.ClientPrefixEntity("etl-"), orders), 3000},
		{model.ConsumerByteRate, "alice", "x", "logs-a", model.TopicEntity(model.UserEntity(model.Exact("alice")), model.Prefix("logs-")), 2000},
		{model.ConsumerByteRate, "bob", "x", "orders", model.TopicEntity(model.UserEntity(model.Default()), orders), 4000},
	} {
		if r := q.ResolveTopic(c.k, c.user, c.client, c.topic); r.Entity != c.want || r.Quota != c.v {
			t.Errorf("%s/%s on %s: %v %v, want %v %v", c.user, c.client, c.topic, r.Entity, r.Quota, c.want, c.v)
		}
	}
	if r := q.ResolveTopic(model.ConsumerByteRate, "alice", "x", "logs-a"); !r.Options.Shadow {
		t.Errorf("shadow lost: %+v", r)
	}
	if r := q.Resolve(model.ProducerByteRate, "alice", "x"); r.Quota != 5000 {
		t.Errorf("alice's client quota: %+v", r)
	}
	for _, tc := range []struct {
		e    QuotaEntry
		want string
	}{
		{QuotaEntry{Topic: sptr(""), ProducerByteRate: fptr(1)}, "Empty topic not supported"},
		{QuotaEntry{TopicPrefix: sptr(""), ProducerByteRate: fptr(1)}, "Empty topic-prefix not supported"},
		{QuotaEntry{Topic: sptr("a"), TopicPrefix: sptr("b"), ProducerByteRate: fptr(1)}, "a quota is on a topic or on a topic-prefix, not both"},
		{QuotaEntry{Topic: sptr("a"), ClientID: sptr("c"), ProducerByteRate: fptr(1)}, "it cannot be combined with client-id or ip"},
		{QuotaEntry{Topic: sptr("a"), DefaultClientID: true, ProducerByteRate: fptr(1)}, "it cannot be combined with client-id or ip"},
		{QuotaEntry{Topic: sptr("a"), User: sptr("u"), ClientIDPrefix: sptr("p"), ProducerByteRate: fptr(1)}, "a client-id-prefix cannot be combined with a user"},
		{QuotaEntry{Topic: sptr("a"), RequestPercentage: fptr(1)}, "Invalid configuration key request_percentage"},
		{QuotaEntry{Topic: sptr("a"), ControllerMutationRate: fptr(1)}, "Invalid configuration key controller_mutation_rate"},
		{QuotaEntry{Topic: sptr("a"), IP: sptr("1.2.3.4"), ConnectionCreationRate: fptr(1)}, "it cannot be combined with client-id or ip"},
		{QuotaEntry{Topic: sptr("a"), ConnectionCreationRate: fptr(1)}, "Invalid configuration key connection_creation_rate"},
		{QuotaEntry{Topic: sptr("a"), ProducerByteRate: fptr(1.5)}, "cannot be a fractional value"},
	} {
		_, err := buildQuotas([]QuotaEntry{tc.e})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.e, err, tc.want)
		}
	}
}

// Each key of an entity is set by one entry; options of two entries of the
// same entity combine.
func TestFileQuotaEntriesOfOneEntity(t *testing.T) {
	q, err := buildQuotas([]QuotaEntry{
		{User: sptr("u"), ProducerByteRate: fptr(1), Shadow: true},
		{User: sptr("u"), ConsumerByteRate: fptr(2), BurstSeconds: fptr(3)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if o := q.Options(model.UserEntity(model.Exact("u"))); !o.Shadow || !o.HasBurst || o.Burst != 3 {
		t.Errorf("options %+v, want shadow and a 3 s burst", o)
	}
	_, err = buildQuotas([]QuotaEntry{
		{User: sptr("u"), ProducerByteRate: fptr(1), BurstSeconds: fptr(1)},
		{User: sptr("u"), ConsumerByteRate: fptr(2), BurstSeconds: fptr(3)},
	})
	if err == nil || err.Error() != "quotas[1]: burst_seconds is set twice for user=u" {
		t.Errorf("two bursts: %v", err)
	}
}
