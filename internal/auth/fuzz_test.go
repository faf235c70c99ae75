package auth

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"
)

// Run one with e.g.: go test ./internal/auth/ -run '^$' -fuzz FuzzParsePlain

var plainSeeds = []string{
	"\x00alice\x00alice-secret",
	"alice\x00alice\x00pw",
	"\x00token\x00tg_aaaaaaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
	"\x00jürgen\x00pässwörd",
	"", "\x00", "\x00\x00", "\x00a\x00b\x00c", "a\x00\xff\x00b",
}

func FuzzParsePlain(f *testing.F) {
	for _, s := range plainSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := parsePlain(msg)
		if err != nil {
			return
		}
		if m.User == "" || m.Password == "" || !utf8.ValidString(m.User) {
			t.Fatalf("accepted %q as %+v", msg, m)
		}
		if got := m.AuthzID + "\x00" + m.User + "\x00" + m.Password; got != string(msg) {
			t.Fatalf("%q parsed as %+v, which encodes to %q", msg, m, got)
		}
	})
}

var scramFirstSeeds = []string{
	"n,,n=alice,r=rOprNGfwEbeRWgbNEkqO",
	"n,a=alice,n=alice,r=abc",
	"n,a=b=3Do=2Cb,n=b=3Do=2Cb,r=abc",
	"n,,n=alice,r=abc,tokenauth=true",
	"n,,n=alice,r=abc,tokenauth=true,foo=bar",
	"y,,n=alice,r=abc", "p=tls-unique,,n=alice,r=abc", "n,,m=x,n=alice,r=abc",
	"n,,n=,r=abc", "n,,n=a=2", "n,", "", "n,,n=a,r=,",
}

func FuzzParseScramClientFirst(f *testing.F) {
	for _, s := range scramFirstSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := parseScramClientFirst(msg)
		if err != nil {
			return
		}
		if m.GS2Header+m.Bare != string(msg) {
			t.Fatalf("header %q + bare %q != %q", m.GS2Header, m.Bare, msg)
		}
		wantHeader := "n,,"
		if m.AuthzID != "" {
			wantHeader = "n,a=" + encodeSaslName(m.AuthzID) + ","
		}
		bare := "n=" + encodeSaslName(m.User) + ",r=" + m.Nonce
		for _, kv := range m.Extensions {
			bare += "," + kv[0] + "=" + kv[1]
		}
		if m.GS2Header != wantHeader || m.Bare != bare {
			t.Fatalf("%q parsed as %+v, which encodes to %q%q", msg, m, wantHeader, bare)
		}
		if m.User == "" || m.Nonce == "" {
			t.Fatalf("accepted empty user or nonce: %q", msg)
		}
	})
}

var scramFinalSeeds = []string{
	"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
	"c=biws,r=abc,ext=1,p=AAAA",
	"c=bixhPWFsaWNlLA==,r=abc,p=AAAA",
	"c=biws,r=abc", "c=biws,r=abc,p=", "c=,r=abc,p=AAAA", "c=biws,r=abc,p=AA\nAA", "", ",,",
}

func FuzzParseScramClientFinal(f *testing.F) {
	for _, s := range scramFinalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := parseScramClientFinal(msg)
		if err != nil {
			return
		}
		enc := base64.StdEncoding.EncodeToString
		if got := m.WithoutProof + ",p=" + enc(m.Proof); got != string(msg) {
			t.Fatalf("%q re-encodes to %q", msg, got)
		}
		wop := "c=" + enc(m.ChannelBinding) + ",r=" + m.Nonce
		for _, kv := range m.Extensions {
			wop += "," + kv[0] + "=" + kv[1]
		}
		if wop != m.WithoutProof || len(m.Proof) == 0 {
			t.Fatalf("%q parsed as %+v", msg, m)
		}
	})
}

var oauthSeeds = []string{
	"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.\x01\x01",
	"n,a=alice,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.\x01traceId=x\x01\x01",
	"n,,\x01auth=Bearer a.b.c\x01\x01", "n,,\x01\x01", "\x01",
}

func FuzzPassthroughIdentity(f *testing.F) {
	mechs := []string{MechanismPlain, MechanismScramSHA256, MechanismScramSHA512, MechanismOAuthBearer, "GSSAPI"}
	for i, seeds := range [][]string{plainSeeds, scramFirstSeeds, scramFirstSeeds, oauthSeeds} {
		for _, s := range seeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, mech uint8, msg []byte) {
		m := mechs[int(mech)%len(mechs)]
		user, err := PassthroughIdentity(m, msg, "")
		if err != nil {
			return
		}
		if user == "" {
			t.Fatalf("%s %q: empty user without error", m, msg)
		}
		switch m {
		case MechanismPlain:
			if !bytes.Contains(msg, []byte("\x00"+user+"\x00")) {
				t.Fatalf("PLAIN %q: user %q not in the message", msg, user)
			}
		case MechanismScramSHA256, MechanismScramSHA512:
			if !strings.Contains(string(msg), ",n="+encodeSaslName(user)+",r=") {
				t.Fatalf("SCRAM %q: user %q not in the message", msg, user)
			}
		}
	})
}

// FuzzScramServer feeds arbitrary client messages to a SCRAM server: it
// must never panic and never authenticate without the password.
func FuzzScramServer(f *testing.F) {
	store := NewMemoryStore()
	if err := store.SetPassword("alice", "alice-secret", 0); err != nil {
		f.Fatal(err)
	}
	for _, s := range scramFirstSeeds {
		for _, s2 := range scramFinalSeeds {
			f.Add([]byte(s), []byte(s2))
		}
	}
	f.Fuzz(func(t *testing.T, first, final []byte) {
		srv, err := NewServer(MechanismScramSHA256, store, WithFakeSecret([]byte("fuzz")))
		if err != nil {
			t.Fatal(err)
		}
		if _, done, err := srv.Step(first); done || err != nil {
			return
		}
		if _, done, err := srv.Step(final); done || err == nil {
			t.Fatalf("authenticated with %q / %q", first, final)
		}
	})
}

func FuzzParseMappingRules(f *testing.F) {
	for _, s := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`,
		`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`,
		"RULE:(.*)/x$1/", "RULE:^CN=(?<n>.*)$/${n}/U", "RULE:a/b/L\nDEFAULT", "DEFAULT/L", ", ,",
	} {
		f.Add(s, "CN=Duke,OU=ServiceUsers,O=Org,C=US")
	}
	f.Fuzz(func(t *testing.T, rules, dn string) {
		m, err := ParseMappingRules(rules)
		if err != nil {
			return
		}
		_, _ = m.Map(dn)
	})
}
