package usage

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// What a query groups by.
const (
	ByUser         = "user"
	ByClientID     = "client-id"
	ByUserClientID = "user,client-id"
	ByTenant       = "tenant"
	// ByTopic and ByUserTopic read the per-topic rows: topics with a
	// per-topic quota, their record bytes.
	ByTopic     = "topic"
	ByUserTopic = "user,topic"
)

// Output formats.
const (
	FormatTable = "table"
	FormatCSV   = "csv"
	FormatJSON  = "json"
)

// maxWarnings bounds the unreadable lines a report names.
const maxWarnings = 20

// Query selects the minutes that start in [Since, Until) and groups them.
type Query struct {
	Since, Until time.Time
	By           string
}

// Validate checks the query.
func (q Query) Validate() error {
	switch q.By {
	case ByUser, ByClientID, ByUserClientID, ByTenant, ByTopic, ByUserTopic:
	default:
		return fmt.Errorf("by %q: want %s, %s, %s, %s, %s or %s", q.By, ByUser, ByClientID, ByUserClientID, ByTenant, ByTopic, ByUserTopic)
	}
	if q.Since.IsZero() || q.Until.IsZero() {
		return errors.New("since and until are required")
	}
	if !q.Since.Before(q.Until) {
		return fmt.Errorf("since %s is not before until %s", q.Since.Format(time.RFC3339), q.Until.Format(time.RFC3339))
	}
	return nil
}

// ParseTime reads a query bound: a time ago ("24h", "90m", "7d"), an
// RFC 3339 time ("2025-06-01T12:00:00Z"), a UTC minute
// ("2025-06-01T12:00") or a UTC day ("2025-06-01").
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, errors.New("empty time")
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil {
			if n <= 0 || n > 100*366 {
				return time.Time{}, fmt.Errorf("%q: want between 1d and 36600d", s)
			}
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("%q: a time ago must be positive", s)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", dayLayout} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a time ago (24h, 90m, 7d) nor a time (2025-06-01T12:00:00Z, 2025-06-01)", s)
}

// ReportRow is one group's totals. Only the fields the query groups by
// are set.
type ReportRow struct {
	// Tenant groups a query by tenant: "" for the users in no tenant.
	Tenant *string `json:"tenant,omitempty"`
	// Topic groups a query by topic (or user and topic).
	Topic    *string `json:"topic,omitempty"`
	User     *string `json:"user,omitempty"`
	ClientID *string `json:"client_id,omitempty"`
	// Overflow marks client ids counted beyond usage.max_keys.
	Overflow bool `json:"overflow,omitempty"`
	Counters
}

// Report is a query's answer.
type Report struct {
	By    string    `json:"by"`
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Instances are the instance ids whose minutes were read.
	Instances []string `json:"instances"`
	// Minutes is how many minute records were read.
	Minutes int         `json:"minutes"`
	Rows    []ReportRow `json:"rows"`
	Total   Counters    `json:"total"`
	// Warnings name lines that could not be read (skipped).
	Warnings []string `json:"warnings,omitempty"`
}

type groupKey struct {
	tenant, user, clientID, topic string
	overflow                      bool
}

// Read answers q from the ledger in dir.
func Read(dir string, q Query) (*Report, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	since := q.Since.UTC().Truncate(time.Minute)
	if !since.Equal(q.Since.UTC()) {
		since = since.Add(time.Minute) // minutes that start at or after Since
	}
	r := &Report{By: q.By, Since: q.Since.UTC(), Until: q.Until.UTC(), Instances: []string{}, Rows: []ReportRow{}}
	days, err := listDays(dir)
	if err != nil {
		return nil, err
	}
	t := &tally{q: q, since: since, r: r, groups: map[groupKey]*Counters{}, instances: map[string]bool{}}
	for _, d := range days {
		if !d.day.Add(24*time.Hour).After(since) || !d.day.Before(q.Until) {
			continue
		}
		if err := t.readDay(d.path); err != nil {
			return nil, err
		}
	}
	if t.skipped > maxWarnings {
		r.Warnings = append(r.Warnings, fmt.Sprintf("... and %d more unreadable lines", t.skipped-maxWarnings))
	}
	for id := range t.instances {
		r.Instances = append(r.Instances, id)
	}
	slices.Sort(r.Instances)
	for g, c := range t.groups {
		r.Rows = append(r.Rows, g.row(q.By, *c))
	}
	slices.SortFunc(r.Rows, compareReportRows)
	return r, nil
}

// tally sums the minutes a query reads into its report, by group.
type tally struct {
	q         Query
	since     time.Time // the first whole minute of the query
	r         *Report
	groups    map[groupKey]*Counters
	instances map[string]bool
	skipped   int // unreadable lines
}

// readDay adds the query's minutes of the day file at path.
func (t *tally) readDay(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	_, err = scanFile(f, func(n int, line []byte) error {
		m, err := decodeMinute(line)
		if err != nil {
			if t.skipped++; t.skipped <= maxWarnings {
				t.r.Warnings = append(t.r.Warnings, fmt.Sprintf("%s:%d: %v (skipped)", path, n, err))
			}
			return nil
		}
		if m.Minute.Before(t.since) || !m.Minute.Before(t.q.Until) {
			return nil
		}
		t.add(&m)
		return nil
	})
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// add counts one minute of the query's into its groups and the total.
func (t *tally) add(m *Minute) {
	t.r.Minutes++
	t.instances[m.Instance] = true
	byTopic := t.q.By == ByTopic || t.q.By == ByUserTopic
	for _, row := range m.Rows {
		if (row.Topic != "") != byTopic {
			continue // a per-topic row is counted in its user's row too
		}
		g := groupOf(t.q.By, row)
		c := t.groups[g]
		if c == nil {
			c = &Counters{}
			t.groups[g] = c
		}
		c.Add(row.Counters)
		t.r.Total.Add(row.Counters)
	}
}

// groupOf is the group a ledger row is counted in when grouping by by.
func groupOf(by string, row Row) groupKey {
	var g groupKey
	switch by {
	case ByTopic:
		g.topic = row.Topic
	case ByUserTopic:
		g.user, g.topic = row.User, row.Topic
	case ByUser:
		g.user = row.User
	case ByClientID:
		g.clientID, g.overflow = row.ClientID, row.Overflow
	case ByTenant:
		g.tenant = row.Tenant
	default:
		g = groupKey{user: row.User, clientID: row.ClientID, overflow: row.Overflow}
	}
	return g
}

// row is the report's row of group g, grouped by by, counting c.
func (g groupKey) row(by string, c Counters) ReportRow {
	row := ReportRow{Counters: c, Overflow: g.overflow}
	switch by {
	case ByTopic:
		row.Topic = &g.topic
	case ByUserTopic:
		row.User, row.Topic = &g.user, &g.topic
	case ByTenant:
		row.Tenant = &g.tenant
	case ByUser:
		row.User = &g.user
	case ByClientID:
		row.ClientID = &g.clientID
	default:
		row.User, row.ClientID = &g.user, &g.clientID
	}
	return row
}

// compareReportRows orders a report biggest first, then by name: what a
// bill lists.
func compareReportRows(a, b ReportRow) int {
	if c := cmp.Compare(b.ProduceBytes+b.FetchBytes, a.ProduceBytes+a.FetchBytes); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Requests, a.Requests); c != 0 {
		return c
	}
	if c := cmp.Compare(deref(a.Tenant), deref(b.Tenant)); c != 0 {
		return c
	}
	if c := cmp.Compare(deref(a.User), deref(b.User)); c != 0 {
		return c
	}
	if a.Overflow != b.Overflow {
		if a.Overflow {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(deref(a.ClientID), deref(b.ClientID)); c != 0 {
		return c
	}
	return cmp.Compare(deref(a.Topic), deref(b.Topic))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ValidFormat checks an output format name.
func ValidFormat(f string) error {
	switch f {
	case FormatTable, FormatCSV, FormatJSON:
		return nil
	}
	return fmt.Errorf("format %q: want %s, %s or %s", f, FormatTable, FormatCSV, FormatJSON)
}

// Write writes the report as a table, CSV or JSON.
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case FormatCSV:
		return r.writeCSV(w)
	case FormatTable:
		return r.writeTable(w)
	}
	return ValidFormat(format)
}

func (r *Report) groupColumns() (tenant, user, client, topic bool) {
	switch r.By {
	case ByTenant:
		return true, false, false, false
	case ByTopic:
		return false, false, false, true
	case ByUserTopic:
		return false, true, false, true
	}
	return false, r.By != ByClientID, r.By != ByUser, false
}

// groupColumn is one of the columns a report is grouped by: its headers
// and cells in CSV and in the table.
type groupColumn struct {
	csvHead []string
	head    string
	csv     func(ReportRow) []string
	cell    func(ReportRow) string
}

// columns are the report's grouping columns, in order.
func (r *Report) columns() []groupColumn {
	tenant, user, client, topic := r.groupColumns()
	var cs []groupColumn
	if tenant {
		cs = append(cs, groupColumn{[]string{"tenant"}, "TENANT",
			func(row ReportRow) []string { return []string{csvCell(deref(row.Tenant))} },
			func(row ReportRow) string {
				if t := deref(row.Tenant); t != "" {
					return tableName(t)
				}
				return "(no tenant)"
			}})
	}
	if user {
		cs = append(cs, groupColumn{[]string{"user"}, "USER",
			func(row ReportRow) []string { return []string{csvCell(deref(row.User))} },
			func(row ReportRow) string { return tableName(deref(row.User)) }})
	}
	if client {
		cs = append(cs, groupColumn{[]string{"client_id", "overflow"}, "CLIENT-ID",
			func(row ReportRow) []string {
				return []string{csvCell(deref(row.ClientID)), strconv.FormatBool(row.Overflow)}
			},
			func(row ReportRow) string {
				if row.Overflow {
					return "(beyond usage.max_keys)"
				}
				return tableName(deref(row.ClientID))
			}})
	}
	if topic {
		cs = append(cs, groupColumn{[]string{"topic"}, "TOPIC",
			func(row ReportRow) []string { return []string{csvCell(deref(row.Topic))} },
			func(row ReportRow) string { return tableName(deref(row.Topic)) }})
	}
	return cs
}

func counterCells(c Counters) []string {
	return []string{
		strconv.FormatInt(c.ProduceBytes, 10), strconv.FormatInt(c.FetchBytes, 10),
		strconv.FormatInt(c.Requests, 10), strconv.FormatInt(c.ThrottleMs, 10),
		strconv.FormatInt(c.PartitionMutations, 10),
	}
}

// writeCSV writes one header line and one line per row. Names come from
// clients (any client picks its client id): a cell a spreadsheet would
// read as a formula is prefixed with a quote (OWASP's CSV injection
// advice).
func (r *Report) writeCSV(w io.Writer) error {
	cols := r.columns()
	cw := csv.NewWriter(w)
	var head []string
	for _, c := range cols {
		head = append(head, c.csvHead...)
	}
	head = append(head, "produce_bytes", "fetch_bytes", "requests", "throttle_ms", "partition_mutations")
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, row := range r.Rows {
		var rec []string
		for _, c := range cols {
			rec = append(rec, c.csv(row)...)
		}
		if err := cw.Write(append(rec, counterCells(row.Counters)...)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func csvCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// writeTable writes a summary line and an aligned table with a total.
// Names with unprintable characters (a terminal's escape sequences) are
// shown quoted.
func (r *Report) writeTable(w io.Writer) error {
	_, user, client, topic := r.groupColumns()
	inst := "none"
	if len(r.Instances) > 0 {
		inst = strings.Join(r.Instances, ", ")
	}
	fmt.Fprintf(w, "Usage by %s from %s to %s: %d minutes (instances: %s)\n\n", r.By,
		r.Since.Format(time.RFC3339), r.Until.Format(time.RFC3339), r.Minutes, inst)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var head []string
	cols := r.columns()
	for _, c := range cols {
		head = append(head, c.head)
	}
	head = append(head, "PRODUCE BYTES", "FETCH BYTES", "REQUESTS", "THROTTLE MS", "PARTITION MUTATIONS")
	line := func(cells []string) { fmt.Fprintln(tw, strings.Join(cells, "\t")) }
	line(head)
	for _, row := range r.Rows {
		var cells []string
		for _, c := range cols {
			cells = append(cells, c.cell(row))
		}
		line(append(cells, counterCells(row.Counters)...))
	}
	total := []string{"TOTAL"}
	if user && (client || topic) {
		total = append(total, "")
	}
	line(append(total, counterCells(r.Total)...))
	return tw.Flush()
}

func tableName(s string) string {
	if s == "" {
		return `""`
	}
	for _, c := range s {
		if !unicode.IsPrint(c) || c == '\t' {
			return strconv.Quote(s)
		}
	}
	return s
}
