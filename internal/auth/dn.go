package auth

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// rfc2253Keywords are the attribute types Java's X500Principal.getName()
// (RFC 2253 format) prints by keyword; every other type is printed as its
// dotted OID with a #hex value.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.9":                    "STREET",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// ASN.1 string tags Java's AVA.isDerString accepts in non-canonical form.
var derStringTags = map[int]bool{
	asn1.TagPrintableString: true,
	asn1.TagT61String:       true,
	asn1.TagIA5String:       true,
	asn1.TagGeneralString:   true,
	asn1.TagUTF8String:      true,
	asn1.TagBMPString:       true,
}

type rawAVA struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rawRDNSET is one RelativeDistinguishedName (encoding/asn1 treats a slice
// type whose name ends in SET as a SET OF).
type rawRDNSET []rawAVA

// DistinguishedName formats the certificate's subject the way Kafka sees
// it: Java's X500Principal.getName(), RFC 2253 order (last RDN first, so a
// subject encoded C, O, OU, CN prints as CN=..,OU=..,O=..,C=..).
func DistinguishedName(cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", errors.New("auth: nil certificate")
	}
	return FormatDN(cert.RawSubject)
}

// FormatDN formats a DER-encoded X.500 Name (RDNSequence) as Java's
// X500Principal.getName() does: RDNs in reverse order joined by ",", the
// AVAs of a multi-valued RDN in encoded order joined by "+", keywords
// CN, C, L, ST, O, OU, STREET, DC, UID and dotted OIDs otherwise; string
// values (decoded as UTF-8 whatever the string type, as the JDK does) with
// `,=+<>#;"\` backslash-escaped anywhere, NUL as \00, spaces or CR escaped
// at either end, other characters as they are; non-string values and
// OID-named types as # and the lower-case hex of the DER value. This is the
// behaviour of current JDKs (sun.security.x509.AVA.toRFC2253String).
func FormatDN(der []byte) (string, error) {
	var seq []rawRDNSET
	rest, err := asn1.Unmarshal(der, &seq)
	if err != nil {
		return "", fmt.Errorf("auth: parsing subject: %w", err)
	}
	if len(rest) != 0 {
		return "", errors.New("auth: trailing data after subject")
	}
	rdns := make([]string, 0, len(seq))
	for i := len(seq) - 1; i >= 0; i-- {
		avas := make([]string, 0, len(seq[i]))
		for _, ava := range seq[i] {
			avas = append(avas, formatAVA(ava))
		}
		rdns = append(rdns, strings.Join(avas, "+"))
	}
	return strings.Join(rdns, ","), nil
}

// formatAVA is AVA.toRFC2253String with an empty keyword map.
func formatAVA(ava rawAVA) string {
	oid := ava.Type.String()
	key, named := rfc2253Keywords[oid]
	if !named {
		key = oid
	}
	v := ava.Value
	if !named || v.Class != asn1.ClassUniversal || v.IsCompound || !derStringTags[v.Tag] {
		return key + "=#" + hex.EncodeToString(v.FullBytes)
	}
	// Java decodes the value bytes as UTF-8 whatever the string type.
	val := decodeUTF8Java(v.Bytes)
	var b strings.Builder
	for _, c := range val {
		switch {
		case strings.ContainsRune(`,=+<>#;"\`, c):
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == 0:
			b.WriteString(`\00`) // RFC 4514
		default:
			b.WriteRune(c)
		}
	}
	chars := []rune(b.String())
	lead := 0
	for lead < len(chars) && (chars[lead] == ' ' || chars[lead] == '\r') {
		lead++
	}
	trail := len(chars) - 1
	for trail >= 0 && (chars[trail] == ' ' || chars[trail] == '\r') {
		trail--
	}
	var out strings.Builder
	out.WriteString(key)
	out.WriteByte('=')
	for i, c := range chars {
		if i < lead || i > trail {
			out.WriteByte('\\')
		}
		out.WriteRune(c)
	}
	return out.String()
}

// decodeUTF8Java is new String(bytes, UTF_8): each malformed byte becomes
// U+FFFD.
func decodeUTF8Java(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var s strings.Builder
	for len(b) > 0 {
		r, w := utf8.DecodeRune(b)
		s.WriteRune(r)
		b = b[w:]
	}
	return s.String()
}
