package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"testing"
	"unicode/utf16"

	"github.com/tollgate/tollgate/internal/testkit/testpki"
)

var (
	oidCN    = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidDC    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidUID   = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
	oidEmail = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	oidTitle = asn1.ObjectIdentifier{2, 5, 4, 12}
	oidOU    = asn1.ObjectIdentifier{2, 5, 4, 11}
)

func str(tag int, s string) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: []byte(s)}
}

func bmp(s string) asn1.RawValue {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u>>8), byte(u))
	}
	return asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagBMPString, Bytes: b}
}

// rawSubject encodes RDNs in the order given (first = least specific).
func rawSubject(t *testing.T, rdns ...[]rawAVA) []byte {
	t.Helper()
	seq := make([]rawRDNSET, len(rdns))
	for i, r := range rdns {
		seq[i] = rawRDNSET(r)
	}
	der, err := asn1.Marshal(seq)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// The DN of generated certificates, as Java's X500Principal.getName()
// prints it (RFC 2253 order: the last RDN of the encoding first).
func TestDistinguishedName(t *testing.T) {
	ca := testpki.NewCA(t, "Tollgate Test CA")
	tests := []struct {
		name    string
		subject pkix.Name
		raw     func(t *testing.T) []byte
		want    string
		// direct: Go's x509 parser refuses such a subject (so a TLS
		// handshake never yields it); format the DER directly.
		direct bool
	}{
		{
			name:    "common attributes",
			subject: pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Example"}, Country: []string{"US"}},
			want:    "CN=alice,OU=eng,O=Example,C=US",
		},
		{
			// Go encodes C, ST, L, STREET, postalCode, O, OU, CN,
			// serialNumber; several values of one attribute share one
			// multi-valued RDN. postalCode and serialNumber have no RFC
			// 2253 keyword: dotted OID and the hex of the DER value.
			name: "all of pkix.Name",
			subject: pkix.Name{
				Country: []string{"US"}, Province: []string{"CA"}, Locality: []string{"San Francisco"},
				StreetAddress: []string{"1 Main St"}, PostalCode: []string{"94105"},
				Organization: []string{"Example, Inc."}, OrganizationalUnit: []string{"ops", "eng"},
				CommonName: "alice", SerialNumber: "42",
			},
			want: `2.5.4.5=#13023432,CN=alice,OU=eng+OU=ops,O=Example\, Inc.,2.5.4.17=#13053934313035,STREET=1 Main St,L=San Francisco,ST=CA,C=US`,
		},
		{
			name:    "special characters",
			subject: pkix.Name{CommonName: ` #a,b+c=d;e<f>g"h\i `},
			want:    `CN=\ \#a\,b\+c\=d\;e\<f\>g\"h\\i\ `,
		},
		{
			name:    "only spaces",
			subject: pkix.Name{CommonName: "  "},
			want:    `CN=\ \ `,
		},
		{
			name:    "trailing CR, inner space",
			subject: pkix.Name{CommonName: "a b\r"},
			want:    "CN=a b\\\r",
		},
		{
			name:    "non-ASCII is printed as is",
			subject: pkix.Name{CommonName: "Jürgen Größe", Organization: []string{"Ümlaut AG"}},
			want:    "CN=Jürgen Größe,O=Ümlaut AG",
		},
		{
			name: "domain components, uid, email, title",
			raw: func(t *testing.T) []byte {
				return rawSubject(t,
					[]rawAVA{{oidDC, str(asn1.TagIA5String, "com")}},
					[]rawAVA{{oidDC, str(asn1.TagIA5String, "example")}},
					[]rawAVA{{oidUID, str(asn1.TagUTF8String, "jdoe")}},
					[]rawAVA{{oidEmail, str(asn1.TagIA5String, "j@example.com")}},
					[]rawAVA{{oidTitle, str(asn1.TagPrintableString, "Dev")}},
				)
			},
			want: "2.5.4.12=#1303446576,1.2.840.113549.1.9.1=#160d6a406578616d706c652e636f6d,UID=jdoe,DC=example,DC=com",
		},
		{
			// A multi-valued RDN keeps the (DER-sorted) encoded order.
			name: "multi-valued RDN",
			raw: func(t *testing.T) []byte {
				return rawSubject(t, []rawAVA{{oidUID, str(asn1.TagUTF8String, "b")}, {oidCN, str(asn1.TagPrintableString, "a")}})
			},
			want: "CN=a+UID=b",
		},
		{
			// Java decodes every string type's bytes as UTF-8: a
			// BMPString's zero bytes become NULs, printed as \00.
			name: "BMPString",
			raw: func(t *testing.T) []byte {
				return rawSubject(t, []rawAVA{{oidCN, bmp("Hi")}})
			},
			want: `CN=\00H\00i`,
		},
		{
			// Not a string type Java prints (NumericString, an INTEGER):
			// hex even under a keyword.
			name: "non-string values",
			raw: func(t *testing.T) []byte {
				return rawSubject(t,
					[]rawAVA{{oidOU, str(asn1.TagNumericString, "123")}},
					[]rawAVA{{oidCN, asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagInteger, Bytes: []byte{5}}}},
				)
			},
			want:   "CN=#020105,OU=#1203313233",
			direct: true,
		},
		{
			name: "invalid UTF-8",
			raw: func(t *testing.T) []byte {
				return rawSubject(t, []rawAVA{{oidCN, str(asn1.TagUTF8String, "a\xffb")}})
			},
			want:   "CN=a\uFFFDb",
			direct: true,
		},
		{
			name: "empty subject",
			raw:  func(t *testing.T) []byte { return []byte{0x30, 0} },
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.direct {
				if got, err := FormatDN(tt.raw(t)); err != nil || got != tt.want {
					t.Fatalf("FormatDN = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			tmpl := &x509.Certificate{Subject: tt.subject}
			if tt.raw != nil {
				tmpl.RawSubject = tt.raw(t)
			}
			cert := ca.Issue(t, tmpl).Cert
			got, err := DistinguishedName(cert)
			if err != nil || got != tt.want {
				t.Fatalf("DistinguishedName = %q, %v\nwant                %q", got, err, tt.want)
			}
		})
	}
	if _, err := FormatDN([]byte{0x30, 0x03, 0x31}); err == nil {
		t.Fatal("truncated subject accepted")
	}
	if _, err := FormatDN(append(rawSubject(t), 0)); err == nil {
		t.Fatal("trailing bytes accepted")
	}
	if _, err := DistinguishedName(nil); err == nil {
		t.Fatal("nil certificate accepted")
	}
}
