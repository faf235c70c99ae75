package app

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/control"
	"github.com/tollgate/tollgate/internal/quota"
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
	r := q.Resolve(quota.ConsumerByteRate, "bob", "etl-7")
	if r.Entity != quota.ClientPrefixEntity("etl-") || !r.Options.Shadow || r.Quota != 2048 {
		t.Errorf("etl-7: %+v", r)
	}
	if r := q.Resolve(quota.ProducerByteRate, "alice", "etl-7"); r.Options.Shadow || r.Options.HasBurst {
		t.Errorf("alice's quota has no options: %+v", r)
	}
	if r := q.Resolve(quota.ProducerByteRate, "bob", "x"); !r.Options.HasBurst || r.Options.Burst != 0 {
		t.Errorf("bob's burst 0: %+v", r)
	}

	for _, tc := range []struct {
		e    QuotaEntry
		want string
	}{
		{QuotaEntry{ClientIDPrefix: sptr(""), ProducerByteRate: fptr(1)}, "client_id_prefix must not be empty"},
		{QuotaEntry{ClientIDPrefix: sptr("p"), User: sptr("u"), ProducerByteRate: fptr(1)}, "client_id_prefix stands alone"},
		{QuotaEntry{ClientIDPrefix: sptr("p"), DefaultClientID: true, ProducerByteRate: fptr(1)}, "client_id_prefix stands alone"},
		{QuotaEntry{ClientIDPrefix: sptr("p"), IP: sptr("1.2.3.4"), ConnectionCreationRate: fptr(1)}, "an ip entity cannot be combined"},
		{QuotaEntry{IP: sptr("1.2.3.4"), ConnectionCreationRate: fptr(1), Shadow: true}, "an ip entity takes only connection_creation_rate"},
		{QuotaEntry{User: sptr("u"), Shadow: true}, "no quota key set"},
		{QuotaEntry{User: sptr("u"), ProducerByteRate: fptr(1), BurstSeconds: fptr(-1)}, "Quota burst_seconds must be from 0 to 3600"},
		{QuotaEntry{User: sptr("u"), ProducerByteRate: fptr(1), BurstSeconds: fptr(4000)}, "Quota burst_seconds must be from 0 to 3600"},
		{QuotaEntry{IP: sptr("1.2.3.4"), ConnectionCreationRate: fptr(1), BurstSeconds: fptr(1)}, "an ip entity takes only connection_creation_rate"},
	} {
		_, err := buildQuotas([]QuotaEntry{tc.e})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.e, err, tc.want)
		}
	}
}
