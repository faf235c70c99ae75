package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"

	"github.com/tollgate/tollgate/internal/principal"
)

// This file is Kafka's SslPrincipalMapper (ssl.principal.mapping.rules,
// KIP-371) on Go's regexp. Kafka's own parsing regexes are reproduced with
// Java's meaning of `.` and `\s`, and Java's Matcher.replaceAll (find loop,
// $n / ${name} / \ escapes in the replacement) is reimplemented, so that
// rules split, parse and rewrite as they do in Kafka. Differences: rule
// patterns are compiled by Go (RE2: no backreferences, lookaround or
// possessive quantifiers; such rules are rejected), and a replacement that
// Java would only reject when it first applies is rejected at parse time.

// Java's `.` (no line terminators) and `\s`.
const (
	javaDot   = `[^\n\r\x{85}\x{2028}\x{2029}]`
	javaSpace = `[ \t\n\x0B\f\r]`
)

// rulePattern is SslPrincipalMapper.RULE_PATTERN:
// (DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)
const rulePattern = `(DEFAULT)|RULE:((\\` + javaDot + `|[^\\/])*)/((\\` + javaDot + `|[^\\/])*)/([LU]?)` + javaDot + `*?|(` + javaDot + `*?)`

var (
	// RULE_SPLITTER is \s*(RULE_PATTERN)\s*(,\s*|$) in Kafka; here a
	// newline separates rules too: \s*(RULE_PATTERN)\s*([,\n]\s*|$).
	// (Kafka, splitting on commas only, silently drops a rule that is
	// followed by a newline instead of a comma.)
	ruleSplitter = regexp.MustCompile(javaSpace + `*(` + rulePattern + `)` + javaSpace + `*([,\n]` + javaSpace + `*|$)`)
	// RULE_PARSER with lookingAt().
	ruleParser = regexp.MustCompile(`\A(?:` + rulePattern + `)`)
	// Rule.BACK_REFERENCE_PATTERN.
	backReference = regexp.MustCompile(`\$(\d+)`)
)

// ErrNoMatchingRule is returned by Map when no rule applies (Kafka's
// NoMatchingRule); the connection must then fail authentication.
var ErrNoMatchingRule = errors.New("no principal mapping rule applies")

// Mapper maps a certificate's distinguished name to a principal name with
// Kafka's ssl.principal.mapping.rules. A nil *Mapper behaves as "DEFAULT".
type Mapper struct {
	rules []*mappingRule
}

type mappingRule struct {
	isDefault   bool
	pattern     string // as written, for String
	replacement string // as written
	lower       bool
	upper       bool
	full        *regexp.Regexp // \A(?:pattern)\z: Matcher.matches()
	find        *regexp.Regexp // pattern: Matcher.find()
	shifted     *regexp.Regexp // one rune of context, then pattern
	tmpl        []replPiece
}

type replPiece struct {
	lit   string
	group int // -1: lit
}

// ParseMappingRules parses ssl.principal.mapping.rules: rules separated by
// commas or newlines (Kafka: commas only), each `DEFAULT` or `RULE:pattern/replacement/[LU]`
// (`\` escapes `/` inside pattern and replacement). An empty string gives
// a mapper with no rules, on which every Map fails, as in Kafka; Kafka's
// default value of the setting is "DEFAULT".
func ParseMappingRules(s string) (*Mapper, error) {
	m := &Mapper{}
	for _, loc := range ruleSplitter.FindAllStringSubmatchIndex(javaTrim(s), -1) {
		rule := javaTrim(s)[loc[2]:loc[3]]
		r, err := parseRule(rule)
		if err != nil {
			return nil, err
		}
		if r != nil {
			m.rules = append(m.rules, r)
		}
	}
	return m, nil
}

// javaTrim is String.trim(): it strips every char <= ' ' at both ends.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

func parseRule(rule string) (*mappingRule, error) {
	loc := ruleParser.FindStringSubmatchIndex(rule)
	if loc == nil {
		return nil, fmt.Errorf("auth: invalid principal mapping rule: %s", rule)
	}
	if loc[1] != len(rule) {
		return nil, fmt.Errorf("auth: invalid principal mapping rule: `%s`, unmatched substring: `%s`", rule, rule[loc[1]:])
	}
	switch {
	case loc[2] >= 0:
		return &mappingRule{isDefault: true}, nil
	case loc[4] < 0:
		return nil, nil // empty rules are ignored
	}
	r := &mappingRule{
		pattern:     rule[loc[4]:loc[5]],
		replacement: rule[loc[8]:loc[9]],
	}
	switch rule[loc[12]:loc[13]] {
	case "L":
		r.lower = true
	case "U":
		r.upper = true
	}
	var err error
	if r.find, err = regexp.Compile(r.pattern); err != nil {
		return nil, fmt.Errorf("auth: principal mapping rule %q: pattern (Go RE2 syntax): %v", rule, err)
	}
	// A pattern that compiles alone can still break when wrapped (an
	// unterminated \Q quotes the wrapper's closing parenthesis).
	if r.full, err = regexp.Compile(`\A(?:` + r.pattern + `)\z`); err != nil {
		return nil, fmt.Errorf("auth: principal mapping rule %q: pattern (Go RE2 syntax): %v", rule, err)
	}
	if r.shifted, err = regexp.Compile(`(?s:.)(?:` + r.pattern + `)`); err != nil {
		return nil, fmt.Errorf("auth: principal mapping rule %q: pattern (Go RE2 syntax): %v", rule, err)
	}
	names := map[string]int{}
	for i, n := range r.find.SubexpNames() {
		if n != "" {
			names[n] = i
		}
	}
	groups := r.find.NumSubexp()
	repl, err := escapeLiteralBackReferences(r.replacement, groups)
	if err == nil {
		r.tmpl, err = compileJavaReplacement(repl, groups, names)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: principal mapping rule %q: replacement: %v", rule, err)
	}
	return r, nil
}

// escapeLiteralBackReferences is Rule.escapeLiteralBackReferences (from
// Apache NiFi): $n naming a group that does not exist is truncated digit by
// digit and, if still too large, escaped into a literal. Like the Java, it
// scans the original string but edits the working copy at the original
// offsets.
func escapeLiteralBackReferences(unescaped string, groups int) (string, error) {
	if groups == 0 {
		return unescaped, nil
	}
	value := unescaped
	for _, loc := range backReference.FindAllStringSubmatchIndex(unescaped, -1) {
		num := unescaped[loc[2]:loc[3]]
		if strings.HasPrefix(num, "0") {
			continue
		}
		idx, err := strconv.ParseInt(num, 10, 32)
		if err != nil {
			return "", fmt.Errorf("back reference $%s: %v", num, err)
		}
		for idx > int64(groups) && idx >= 10 {
			idx /= 10
		}
		if idx > int64(groups) {
			at := loc[2] - 1
			if at > len(value) {
				at = len(value)
			}
			value = value[:at] + `\` + value[at:]
		}
	}
	return value, nil
}

// compileJavaReplacement parses a java.util.regex replacement string the
// way Matcher.appendExpandedReplacement does.
func compileJavaReplacement(repl string, groups int, names map[string]int) ([]replPiece, error) {
	var out []replPiece
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, replPiece{lit: lit.String(), group: -1})
			lit.Reset()
		}
	}
	for i := 0; i < len(repl); {
		c, w := utf8.DecodeRuneInString(repl[i:])
		switch c {
		case '\\':
			i += w
			if i == len(repl) {
				return nil, errors.New("character to be escaped is missing")
			}
			c, w = utf8.DecodeRuneInString(repl[i:])
			lit.WriteRune(c)
			i += w
		case '$':
			i++
			if i == len(repl) {
				return nil, errors.New("illegal group reference: group index is missing")
			}
			ref := 0
			if repl[i] == '{' {
				i++
				start := i
				for i < len(repl) && isASCIIAlnum(repl[i]) {
					i++
				}
				name := repl[start:i]
				if name == "" {
					return nil, errors.New("named capturing group has 0 length name")
				}
				if i == len(repl) || repl[i] != '}' {
					return nil, errors.New("named capturing group is missing trailing '}'")
				}
				if name[0] >= '0' && name[0] <= '9' {
					return nil, fmt.Errorf("capturing group name {%s} starts with digit character", name)
				}
				n, ok := names[name]
				if !ok {
					return nil, fmt.Errorf("no group with name {%s}", name)
				}
				ref = n
				i++
			} else {
				if repl[i] < '0' || repl[i] > '9' {
					return nil, errors.New("illegal group reference")
				}
				ref = int(repl[i] - '0')
				i++
				for i < len(repl) && repl[i] >= '0' && repl[i] <= '9' {
					next := ref*10 + int(repl[i]-'0')
					if next > groups {
						break
					}
					ref = next
					i++
				}
				if ref > groups {
					return nil, fmt.Errorf("no group %d", ref)
				}
			}
			flush()
			out = append(out, replPiece{group: ref})
		default:
			lit.WriteRune(c)
			i += w
		}
	}
	flush()
	return out, nil
}

func isASCIIAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Map returns the principal name for a distinguished name: the first rule
// whose pattern matches the whole DN rewrites it (Java
// String.replaceAll), then folds case for /L or /U; DEFAULT returns the DN
// unchanged.
func (m *Mapper) Map(dn string) (string, error) {
	if m == nil {
		return dn, nil
	}
	for _, r := range m.rules {
		if r.isDefault {
			return dn, nil
		}
		if !r.full.MatchString(dn) {
			continue
		}
		out := r.replaceAll(dn)
		switch {
		case r.lower:
			out = cases.Lower(language.English).String(out)
		case r.upper:
			out = cases.Upper(language.English).String(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("%w: no rules apply to %s, rules %s", ErrNoMatchingRule, dn, m.rulesString())
}

// replaceAll is Matcher.replaceAll: successive find() calls, where a find
// starts where the last match ended (one char further after an empty
// match) and an empty match right after a non-empty one counts.
func (r *mappingRule) replaceAll(s string) string {
	var b strings.Builder
	appendPos, pos := 0, 0
	for pos <= len(s) {
		loc := r.findFrom(s, pos)
		if loc == nil {
			break
		}
		b.WriteString(s[appendPos:loc[0]])
		for _, p := range r.tmpl {
			if p.group < 0 {
				b.WriteString(p.lit)
			} else if loc[2*p.group] >= 0 {
				b.WriteString(s[loc[2*p.group]:loc[2*p.group+1]])
			}
		}
		appendPos = loc[1]
		if loc[1] > loc[0] {
			pos = loc[1]
			continue
		}
		if loc[1] >= len(s) {
			break
		}
		_, w := utf8.DecodeRuneInString(s[loc[1]:])
		pos = loc[1] + w
	}
	b.WriteString(s[appendPos:])
	return b.String()
}

// findFrom is Matcher.find() starting at pos with the text before pos
// still visible to ^ and \b: the shifted regexp consumes the rune before
// pos as context.
func (r *mappingRule) findFrom(s string, pos int) []int {
	if pos == 0 {
		return r.find.FindStringSubmatchIndex(s)
	}
	_, w := utf8.DecodeLastRuneInString(s[:pos])
	base := pos - w
	loc := r.shifted.FindStringSubmatchIndex(s[base:])
	if loc == nil {
		return nil
	}
	_, cw := utf8.DecodeRuneInString(s[base+loc[0]:])
	loc[0] += cw
	for i := range loc {
		if loc[i] >= 0 {
			loc[i] += base
		}
	}
	return loc
}

// String is Kafka's Rule.toString.
func (r *mappingRule) String() string {
	if r.isDefault {
		return "DEFAULT"
	}
	s := "RULE:" + r.pattern + "/" + r.replacement
	switch {
	case r.lower:
		s += "/L"
	case r.upper:
		s += "/U"
	}
	return s
}

// Rules returns the parsed rules as Kafka prints them.
func (m *Mapper) Rules() []string {
	if m == nil {
		return []string{"DEFAULT"}
	}
	out := make([]string, len(m.rules))
	for i, r := range m.rules {
		out[i] = r.String()
	}
	return out
}

func (m *Mapper) rulesString() string { return "[" + strings.Join(m.Rules(), ", ") + "]" }

// String is SslPrincipalMapper.toString.
func (m *Mapper) String() string { return "SslPrincipalMapper(rules = " + m.rulesString() + ")" }

// PrincipalFromCert maps a client certificate's subject (formatted by
// DistinguishedName) to a User principal.
func (m *Mapper) PrincipalFromCert(cert *x509.Certificate) (principal.Principal, error) {
	dn, err := DistinguishedName(cert)
	if err != nil {
		return principal.Principal{}, err
	}
	name, err := m.Map(dn)
	if err != nil {
		return principal.Principal{}, err
	}
	return principal.Principal{Type: "User", Name: name}, nil
}

// PrincipalFromTLS is Kafka's DefaultKafkaPrincipalBuilder for SSL: the
// mapped subject of the verified client certificate, or ANONYMOUS when the
// client sent none.
func (m *Mapper) PrincipalFromTLS(cs tls.ConnectionState) (principal.Principal, error) {
	if len(cs.PeerCertificates) == 0 {
		return principal.AnonymousPrincipal, nil
	}
	return m.PrincipalFromCert(cs.PeerCertificates[0])
}
