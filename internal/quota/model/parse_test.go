package model

import (
	"strings"
	"testing"
)

func sp(s string) *string   { return &s }
func fp(f float64) *float64 { return &f }

// One entry, one message per mistake: Kafka's where AlterClientQuotas
// would refuse the same entity or value.
func TestFileEntryParse(t *testing.T) {
	for _, tc := range []struct {
		e    FileEntry
		want []string
	}{
		{FileEntry{User: sp(""), ProducerByteRate: fp(1)}, []string{"Empty user not supported"}},
		{FileEntry{User: sp("u"), DefaultUser: true, ProducerByteRate: fp(1)}, []string{"user and default_user are exclusive"}},
		{FileEntry{IP: sp("1.2.3.4"), ClientID: sp("c"), ConnectionCreationRate: fp(1)},
			[]string{"Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"}},
		{FileEntry{IP: sp("example.invalid"), ConnectionCreationRate: fp(1)}, []string{"example.invalid is not a valid IP or resolvable host."}},
		{FileEntry{User: sp("u"), ProducerByteRate: fp(-1), ConsumerByteRate: fp(1.5), ConnectionCreationRate: fp(1)}, []string{
			"Quota producer_byte_rate must be greater than 0", "consumer_byte_rate cannot be a fractional value.",
			"Invalid configuration key connection_creation_rate"}},
		{FileEntry{ClientID: sp("app"), Shadow: true}, []string{"no quota key set for client-id=app"}},
		{FileEntry{User: sp("u"), ProducerByteRate: fp(1), BurstSeconds: fp(4000)},
			[]string{"Quota burst_seconds must be from 0 to 3600 (seconds of quota a fresh client may send at once; 0: none; remove the key for Kafka's, 10)"}},
	} {
		_, errs := tc.e.Parse()
		var got []string
		for _, err := range errs {
			got = append(got, err.Error())
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}

func TestEntriesParsed(t *testing.T) {
	var s Entries
	en, errs := s.Add(FileEntry{User: sp("alice"), ClientID: sp("a b"), ProducerByteRate: fp(10), Shadow: true, BurstSeconds: fp(0)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if e, ok := en.Entity(); !ok || e != UserClientEntity(Exact("alice"), Exact("a b")) {
		t.Errorf("entity %v", e)
	}
	if o := en.Options(); !o.Shadow || !o.HasBurst || o.Burst != 0 {
		t.Errorf("options %+v", o)
	}
	if got := en.String(); got != `user=alice,client-id="a b"` {
		t.Errorf("String %s", got)
	}
	if _, errs := s.Add(FileEntry{ClientID: sp("a b"), User: sp("alice"), ProducerByteRate: fp(20)}); len(errs) != 1 ||
		errs[0].Error() != `producer_byte_rate is set twice for user=alice,client-id="a b"` {
		t.Errorf("duplicate: %v", errs)
	}
	if _, errs := s.Add(FileEntry{User: sp("alice"), ClientID: sp("a b"), ConsumerByteRate: fp(20)}); len(errs) != 0 {
		t.Errorf("another key of the entity: %v", errs)
	}
	ip, errs := s.Add(FileEntry{DefaultIP: true, ConnectionCreationRate: fp(5)})
	if _, ok := ip.Entity(); len(errs) > 0 || ok || !ip.IsIP() || ip.IP() != nil || ip.Values[KeyConnectionCreationRate] != 5 {
		t.Errorf("default ip: %+v %v", ip, errs)
	}
}
