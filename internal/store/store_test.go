package store

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func set(key string, v float64) Op { return Op{Key: key, Value: v} }
func remove(key string) Op         { return Op{Key: key, Remove: true} }

func values(t *testing.T, s *Store, e Entity) map[string]float64 {
	t.Helper()
	v, err := s.ClientQuota(e)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// oddNames must all round-trip exactly and stay distinct from each other
// and from the default.
var oddNames = []string{
	"alice", "a/b", "a=b", "user=alice,client-id=x", "with space", " lead", "trail ",
	"<default>", "%3Cdefault%3E", "ünïcødé", "日本語", "emoji 🚀", "a\x00b", "\x00", "",
	"null", "*", "+", "1.2.3.4", strings.Repeat("x", 1000),
}

func TestEntityCanonical(t *testing.T) {
	a := MustEntity(Named(TypeUser, "u"), DefaultOf(TypeClientID))
	b := MustEntity(DefaultOf(TypeClientID), Named(TypeUser, "u"))
	if !a.Equal(b) || string(a.Key()) != string(b.Key()) {
		t.Fatalf("order matters: %v %v", a, b)
	}
	if a[0].Type != TypeClientID {
		t.Fatalf("not sorted by type: %v", a)
	}
	// A default's name is cleared so that it cannot leak into equality.
	c := MustEntity(Component{Type: TypeUser, Name: "junk", Default: true})
	if !c.Equal(MustEntity(DefaultOf(TypeUser))) {
		t.Fatalf("default with a name: %v", c)
	}
	for _, bad := range [][]Component{
		nil,
		{Named("group", "g")},
		{Named("", "x")},
		{Named(TypeUser, "a"), DefaultOf(TypeUser)},
	} {
		if _, err := NewEntity(bad...); err == nil {
			t.Errorf("NewEntity(%v) accepted", bad)
		}
	}
}

func TestEntityKeyInjective(t *testing.T) {
	seen := map[string]Entity{}
	add := func(e Entity) {
		k := string(e.Key())
		if o, ok := seen[k]; ok && !o.Equal(e) {
			t.Fatalf("key collision: %v and %v", o, e)
		}
		seen[k] = e
		d, err := decodeEntity([]byte(k))
		if err != nil || !d.Equal(e) {
			t.Fatalf("decode(%v) = %v, %v", e, d, err)
		}
	}
	for _, n := range oddNames {
		add(MustEntity(Named(TypeUser, n)))
		add(MustEntity(Named(TypeClientID, n)))
		add(MustEntity(Named(TypeIP, n)))
		add(MustEntity(Named(TypeUser, n), DefaultOf(TypeClientID)))
		for _, m := range oddNames[:6] {
			add(MustEntity(Named(TypeUser, n), Named(TypeClientID, m)))
			add(MustEntity(DefaultOf(TypeUser), Named(TypeClientID, n+m)))
		}
	}
	add(MustEntity(DefaultOf(TypeUser)))
	add(MustEntity(DefaultOf(TypeClientID)))
	add(MustEntity(DefaultOf(TypeIP)))
	add(MustEntity(DefaultOf(TypeUser), DefaultOf(TypeClientID)))
	for _, bad := range [][]byte{{1}, {4, 'u', 's', 'e', 'r', 2}, {4, 'u', 's', 'e', 'r', 0, 9, 'x'}, {2, 'x', 'y', 1}} {
		if _, err := decodeEntity(bad); err == nil {
			t.Errorf("decodeEntity(%q) accepted", bad)
		}
	}
}

func TestOddNamesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	var changes []EntityChange
	want := map[string]float64{}
	for i, n := range oddNames {
		for j, e := range []Entity{
			MustEntity(Named(TypeUser, n)),
			MustEntity(Named(TypeClientID, n), DefaultOf(TypeUser)),
			MustEntity(Named(TypeIP, n)),
		} {
			v := float64(1000*i + j + 1)
			changes = append(changes, EntityChange{Entity: e, Ops: []Op{set("producer_byte_rate", v)}})
			want[string(e.Key())] = v
		}
	}
	defaults := []Entity{
		MustEntity(DefaultOf(TypeUser)),
		MustEntity(DefaultOf(TypeClientID), DefaultOf(TypeUser)),
		MustEntity(DefaultOf(TypeIP)),
	}
	for i, e := range defaults {
		changes = append(changes, EntityChange{Entity: e, Ops: []Op{set("producer_byte_rate", float64(-i-1))}})
		want[string(e.Key())] = float64(-i - 1)
	}
	if err := s.AlterClientQuotas(changes); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir)
	all, err := s.ClientQuotas()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(want) {
		t.Fatalf("got %d entities, want %d", len(all), len(want))
	}
	for _, eq := range all {
		if w, ok := want[string(eq.Entity.Key())]; !ok || eq.Values["producer_byte_rate"] != w || len(eq.Values) != 1 {
			t.Errorf("%v: %v, want %v", eq.Entity, eq.Values, w)
		}
	}
	// The literal "<default>" user is not the default user.
	lit := values(t, s, MustEntity(Named(TypeUser, "<default>")))
	def := values(t, s, MustEntity(DefaultOf(TypeUser)))
	if lit["producer_byte_rate"] == def["producer_byte_rate"] {
		t.Fatalf("<default> and the default share a value: %v %v", lit, def)
	}
}

func TestAlterSemantics(t *testing.T) {
	s := open(t, t.TempDir())
	u := MustEntity(Named(TypeUser, "u"))
	res, err := s.AlterClientQuotasFunc([]EntityChange{{Entity: u, Ops: []Op{set("a", 1), set("b", 2)}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Changed || len(res[0].Changes) != 2 || res[0].Changes[0].Old != nil || *res[0].Changes[0].New != 1 {
		t.Fatalf("first set: %+v", res)
	}
	// Same value: no write; removing an unset key: no write.
	res, err = s.AlterClientQuotasFunc([]EntityChange{{Entity: u, Ops: []Op{set("a", 1), remove("zzz")}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Changed || *res[0].Changes[0].Old != 1 || *res[0].Changes[0].New != 1 || res[0].Changes[1].Old != nil || res[0].Changes[1].New != nil {
		t.Fatalf("no-op: %+v", res)
	}
	// Ops apply in order: the second op sees the first.
	res, err = s.AlterClientQuotasFunc([]EntityChange{{Entity: u, Ops: []Op{set("a", 5), remove("a"), remove("b")}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := res[0].Changes; *c[1].Old != 5 || c[1].New != nil || *c[2].Old != 2 {
		t.Fatalf("ordered ops: %+v", c)
	}
	// The last key removed: the entity is gone.
	all, err := s.ClientQuotas()
	if err != nil || len(all) != 0 {
		t.Fatalf("entity not removed: %v %v", all, err)
	}
	// Special floats round-trip bit for bit.
	for _, v := range []float64{math.Inf(1), math.NaN(), math.Copysign(0, -1), 1e308, 5e-324, 1235.0000001} {
		if err := s.AlterClientQuotas([]EntityChange{{Entity: u, Ops: []Op{set("v", v)}}}); err != nil {
			t.Fatal(err)
		}
		got := values(t, s, u)["v"]
		if math.Float64bits(got) != math.Float64bits(v) {
			t.Errorf("%v stored as %v", v, got)
		}
	}
	// -0 and +0 differ (Java's Double.equals): setting +0 over -0 writes.
	res, err = s.AlterClientQuotasFunc([]EntityChange{{Entity: u, Ops: []Op{set("v", 0)}}}, nil)
	if err != nil || !res[0].Changed {
		t.Fatalf("+0 over -0: %+v %v", res, err)
	}
	// Invalid input changes nothing, the whole call included.
	for _, bad := range []EntityChange{
		{Entity: Entity{Named("group", "x")}, Ops: []Op{set("a", 1)}},
		{Entity: nil, Ops: []Op{set("a", 1)}},
		{Entity: u, Ops: []Op{set("", 1)}},
	} {
		err := s.AlterClientQuotas([]EntityChange{{Entity: u, Ops: []Op{set("w", 9)}}, bad})
		if err == nil {
			t.Errorf("%+v accepted", bad)
		}
		if _, ok := values(t, s, u)["w"]; ok {
			t.Fatalf("partial commit with %+v", bad)
		}
	}
}

func TestAlterHook(t *testing.T) {
	s := open(t, t.TempDir())
	u := MustEntity(Named(TypeUser, "u"))
	if err := s.AlterClientQuotas([]EntityChange{{Entity: u, Ops: []Op{set("a", 1)}}}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("audit down")
	var seen []EntityResult
	_, err := s.AlterClientQuotasFunc([]EntityChange{{Entity: u, Ops: []Op{set("a", 2)}}}, func(r []EntityResult) error {
		seen = r
		return boom
	})
	if err != boom {
		t.Fatalf("hook error not returned as is: %v", err)
	}
	if len(seen) != 1 || *seen[0].Changes[0].Old != 1 || *seen[0].Changes[0].New != 2 {
		t.Fatalf("hook saw %+v", seen)
	}
	if v := values(t, s, u)["a"]; v != 1 {
		t.Fatalf("refused change committed: %v", v)
	}
}

func TestSubscribe(t *testing.T) {
	s := open(t, t.TempDir())
	ch, cancel := s.Subscribe()
	ch2, cancel2 := s.Subscribe()
	defer cancel2()
	u := MustEntity(Named(TypeUser, "u"))
	if err := s.AlterClientQuotas([]EntityChange{{Entity: u, Ops: []Op{set("a", 1)}}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []<-chan struct{}{ch, ch2} {
		select {
		case <-c:
		case <-time.After(time.Second):
			t.Fatal("no signal after a change")
		}
	}
	// A no-op commits nothing and signals nothing.
	if err := s.AlterClientQuotas([]EntityChange{{Entity: u, Ops: []Op{set("a", 1)}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("signal after a no-op")
	default:
	}
	// Signals coalesce.
	for i := range 5 {
		if err := s.SetBrokerConfigs([]BrokerChange{{Broker: BrokerID(1), Ops: []ConfigOp{{Key: "k", Value: strconv.Itoa(i)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	<-ch
	select {
	case <-ch:
		t.Fatal("signals did not coalesce")
	default:
	}
	cancel()
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("cancel did not close the channel")
	}
	s.Close()
	<-ch2 // the buffered signal of the broker config changes
	if _, ok := <-ch2; ok {
		t.Fatal("Close did not close the channel")
	}
	ch3, _ := s.Subscribe()
	if _, ok := <-ch3; ok {
		t.Fatal("Subscribe after Close returned an open channel")
	}
}

func TestBrokerConfigs(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	res, err := s.SetBrokerConfigsFunc([]BrokerChange{
		{Broker: BrokerID(2), Ops: []ConfigOp{{Key: "log.retention.ms", Value: "1000"}}},
		{Broker: BrokerDefault(), Ops: []ConfigOp{{Key: "k", Value: "<default>"}, {Key: "e", Value: ""}}},
		{Broker: BrokerID(-1), Ops: []ConfigOp{{Key: "x", Value: "y"}}},
	}, nil)
	if err != nil || len(res) != 3 || !res[1].Changed {
		t.Fatalf("%+v %v", res, err)
	}
	s.Close()
	s = open(t, dir)
	got, err := s.BrokerConfigs()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]BrokerConfigs{
		{BrokerDefault(), map[string]string{"k": "<default>", "e": ""}},
		{BrokerID(-1), map[string]string{"x": "y"}},
		{BrokerID(2), map[string]string{"log.retention.ms": "1000"}},
	})
	if fmt.Sprint(got) != want {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	res, err = s.SetBrokerConfigsFunc([]BrokerChange{{Broker: BrokerID(-1), Ops: []ConfigOp{{Key: "x", Remove: true}}}}, nil)
	if err != nil || *res[0].Changes[0].Old != "y" || res[0].Changes[0].New != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if got, _ := s.BrokerConfigs(); len(got) != 2 {
		t.Fatalf("emptied scope still listed: %v", got)
	}
}

func TestSecondOpenFails(t *testing.T) {
	dir := t.TempDir()
	open(t, dir)
	start := time.Now()
	if s, err := Open(dir); err == nil {
		s.Close()
		t.Fatal("second Open of a locked file succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("second Open took %v", d)
	}
}

func TestFileLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "data")
	s := open(t, dir)
	if s.Path() != filepath.Join(dir, FileName) {
		t.Fatalf("path %s", s.Path())
	}
	if s.db.NoSync {
		t.Fatal("commits are not fsync'd")
	}
	fi, err := os.Stat(s.Path())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode: %v %v", fi, err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDurableWithoutClose copies the file right after AlterClientQuotas
// returns, as a crash would leave it (no Close), and opens the copy.
func TestDurableWithoutClose(t *testing.T) {
	s := open(t, t.TempDir())
	u := MustEntity(Named(TypeUser, "alice"), DefaultOf(TypeClientID))
	for i := 1; i <= 3; i++ {
		if err := s.AlterClientQuotas([]EntityChange{{Entity: u, Ops: []Op{set("producer_byte_rate", float64(i))}}}); err != nil {
			t.Fatal(err)
		}
		cp := t.TempDir()
		copyFile(t, s.Path(), filepath.Join(cp, FileName))
		c := open(t, cp)
		if v := values(t, c, u)["producer_byte_rate"]; v != float64(i) {
			t.Fatalf("copy after change %d has %v", i, v)
		}
		c.Close()
	}
}

const childEnv = "TOLLGATE_STORE_KILL_CHILD"

// TestKill9 runs a child process that alters the store in a loop and says
// "acked N" after each AlterClientQuotas returns; the parent SIGKILLs it
// and checks the reopened store has at least the last acknowledged value.
func TestKill9(t *testing.T) {
	if dir := os.Getenv(childEnv); dir != "" {
		kill9Child(dir)
		return
	}
	if testing.Short() {
		t.Skip("subprocess test")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	last := -1
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		n, ok := strings.CutPrefix(sc.Text(), "acked ")
		if !ok {
			continue
		}
		if last, err = strconv.Atoi(n); err != nil {
			t.Fatal(err)
		}
		if last >= 25 {
			break
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if last < 25 {
		t.Fatalf("child stopped after ack %d: %v", last, sc.Err())
	}
	s := open(t, dir)
	v, ok := values(t, s, MustEntity(Named(TypeUser, "kill9")))["producer_byte_rate"]
	if !ok || v < float64(last) {
		t.Fatalf("after kill -9: value %v (set %v), last acknowledged %d", v, ok, last)
	}
	bc, err := s.BrokerConfigs()
	if err != nil || len(bc) != 1 {
		t.Fatalf("broker configs after kill -9: %v %v", bc, err)
	}
	if n, _ := strconv.Atoi(bc[0].Values["n"]); n < last {
		t.Fatalf("broker config %v after ack %d", bc[0].Values, last)
	}
}

func kill9Child(dir string) {
	s, err := Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	u := MustEntity(Named(TypeUser, "kill9"))
	for i := 0; ; i++ {
		err := s.AlterClientQuotas([]EntityChange{{Entity: u, Ops: []Op{set("producer_byte_rate", float64(i))}}})
		if err == nil {
			err = s.SetBrokerConfigs([]BrokerChange{{Broker: BrokerDefault(), Ops: []ConfigOp{{Key: "n", Value: strconv.Itoa(i)}}}})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("acked %d\n", i)
	}
}

// Release lets another opener (a new tollgate process taking over) have
// the file while the store stays open: reads and writes fail with
// ErrReleased, nothing is changed. Reacquire takes the file back once the
// other has let go, sees what it wrote, and tells subscribers.
func TestReleaseReacquire(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	u := MustEntity(Named(TypeUser, "u"))
	if err := s.AlterClientQuotas([]EntityChange{{Entity: u, Ops: []Op{set("a", 1)}}}); err != nil {
		t.Fatal(err)
	}
	ch, cancel := s.Subscribe()
	defer cancel()
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(); err != nil {
		t.Fatalf("a second Release: %v", err)
	}
	if _, err := s.ClientQuota(u); !errors.Is(err, ErrReleased) {
		t.Fatalf("read while released: %v, want ErrReleased", err)
	}
	if err := s.AlterClientQuotas([]EntityChange{{Entity: u, Ops: []Op{set("a", 9)}}}); !errors.Is(err, ErrReleased) {
		t.Fatalf("write while released: %v, want ErrReleased", err)
	}
	if _, err := s.APIKeys(); !errors.Is(err, ErrReleased) {
		t.Fatalf("credentials read while released: %v, want ErrReleased", err)
	}

	other, err := Open(dir) // the file lock is free
	if err != nil {
		t.Fatalf("another opener after Release: %v", err)
	}
	if got := values(t, other, u); got["a"] != 1 {
		t.Fatalf("the other opener reads %v: a write while released changed something", got)
	}
	if err := other.AlterClientQuotas([]EntityChange{{Entity: u, Ops: []Op{set("b", 2)}}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Reacquire(100 * time.Millisecond); err == nil {
		t.Fatal("Reacquire while the other opener holds the file succeeded")
	} else if time.Since(start) > 5*time.Second {
		t.Fatalf("Reacquire waited %v", time.Since(start))
	}
	other.Close()
	if err := s.Reacquire(time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("no signal after Reacquire: subscribers would miss what the other process changed")
	}
	if got := values(t, s, u); got["a"] != 1 || got["b"] != 2 {
		t.Fatalf("after Reacquire: %v, want the other opener's change too", got)
	}
	if err := s.AlterClientQuotas([]EntityChange{{Entity: u, Ops: []Op{set("c", 3)}}}); err != nil {
		t.Fatalf("write after Reacquire: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Reacquire(time.Second); err == nil {
		t.Fatal("Reacquire after Close succeeded")
	}
}

// Close of a released store closes nothing twice.
func TestCloseReleased(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFollow: fn runs once subscribed, again after a change, and Follow
// returns when the store closes.
func TestFollow(t *testing.T) {
	s := open(t, t.TempDir())
	calls := make(chan struct{}, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		call := func() { calls <- struct{}{} }
		s.Follow(t.Context(), call, call)
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-calls:
		case <-time.After(5 * time.Second):
			t.Fatal("fn not called " + what)
		}
	}
	wait("once subscribed")
	u := MustEntity(Named(TypeUser, "u"))
	if err := s.AlterClientQuotas([]EntityChange{{Entity: u, Ops: []Op{set("a", 1)}}}); err != nil {
		t.Fatal(err)
	}
	wait("after a change")
	s.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not return when the store closed")
	}
}
