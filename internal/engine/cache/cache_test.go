package cache_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/memgate/memgate/internal/engine/cache"
)

// key names a user's entry as of a revision, as the cache's callers do.
type key struct {
	user string
	rev  int64
	id   int
}

func (k key) Owner() cache.Owner { return cache.Owner{User: k.user} }

func newCache(max int) *cache.Cache[key, string] {
	return cache.New("test", max, func(_ key, v string) int { return len(v) })
}

// TestRevisionInTheKey: an entry answers only under the revision it was
// kept at, for its user and id; a newer revision is a miss until kept.
func TestRevisionInTheKey(t *testing.T) {
	c := newCache(1 << 20)
	c.Put(key{"alice", 3, 1}, "three")
	tests := []struct {
		name string
		k    key
		want string
		held bool
	}{
		{"held", key{"alice", 3, 1}, "three", true},
		{"a newer revision", key{"alice", 4, 1}, "", false},
		{"an older revision", key{"alice", 2, 1}, "", false},
		{"another id", key{"alice", 3, 2}, "", false},
		{"another user", key{"bob", 3, 1}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, held := c.Get(tt.k); got != tt.want || held != tt.held {
				t.Fatalf("Get(%v) = %q, %v; want %q, %v", tt.k, got, held, tt.want, tt.held)
			}
		})
	}
	c.Put(key{"alice", 3, 1}, "again") // replaced, accounted once
	if n, bytes := c.Usage(); n != 1 || bytes != 128+len("again") {
		t.Fatalf("after a replace: %d entries, %d bytes", n, bytes)
	}
}

// TestEvictsLeastRecentlyUsed fills a cache bounded at two entries with a
// third and checks the entry used least recently is the one evicted, the
// bytes stay within the bound, and a value larger than the bound is not
// kept (and evicts nothing).
func TestEvictsLeastRecentlyUsed(t *testing.T) {
	v := fmt.Sprintf("%0100d", 0)
	one := 128 + len(v)
	c := newCache(2*one + one/2)
	c.Put(key{"alice", 1, 1}, v)
	c.Put(key{"bob", 1, 1}, v)
	c.Get(key{"alice", 1, 1}) // alice used after bob
	c.Put(key{"carol", 1, 1}, v)
	for user, want := range map[string]bool{"alice": true, "bob": false, "carol": true} {
		if _, held := c.Get(key{user, 1, 1}); held != want {
			t.Errorf("%s held %v, want %v", user, held, want)
		}
	}
	if _, bytes := c.Usage(); bytes > c.Max() {
		t.Fatalf("%d bytes past the bound %d", bytes, c.Max())
	}
	c.Put(key{"dave", 1, 1}, fmt.Sprintf("%0*d", c.Max(), 0))
	if _, held := c.Get(key{"dave", 1, 1}); held {
		t.Fatal("a value past the bound alone was kept")
	}
	for _, user := range []string{"alice", "carol"} {
		if _, held := c.Get(key{user, 1, 1}); !held {
			t.Errorf("%s evicted by a value never kept", user)
		}
	}
	if got := value(t, c.Collectors()[2]); got != 1 {
		t.Fatalf("evictions = %v, want 1", got)
	}
}

// TestDropAndMetrics: Drop forgets the matching entries only, and the
// metrics count the lookups answered and not.
func TestDropAndMetrics(t *testing.T) {
	c := newCache(1 << 20)
	for rev := range int64(3) {
		c.Put(key{"alice", rev, 1}, "a")
		c.Put(key{"bob", rev, 1}, "b")
	}
	c.Drop(func(k key) bool { return k.user == "alice" })
	if n, _ := c.Usage(); n != 3 {
		t.Fatalf("%d entries after Drop, want bob's 3", n)
	}
	if _, held := c.Get(key{"alice", 2, 1}); held {
		t.Fatal("alice's entry survived Drop")
	}
	if _, held := c.Get(key{"bob", 2, 1}); !held {
		t.Fatal("bob's entry dropped")
	}
	cs := c.Collectors()
	if hits, misses := value(t, cs[0]), value(t, cs[1]); hits != 1 || misses != 1 {
		t.Fatalf("hits %v, misses %v; want 1, 1", hits, misses)
	}
	if got := value(t, cs[3]); got != float64(3*(128+1)) {
		t.Fatalf("bytes gauge %v", got)
	}
}

// value reads a counter's or gauge's value.
func value(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// TestForget: Forget drops the user's entries, and only theirs, whatever
// the entries went through before (replaced, evicted, expired, read,
// forgotten): a cache that forgets by Forget holds what one that visits
// every entry (Drop) does, after every step of a random run.
func TestForget(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	one := 128 + 1
	indexed := newCache(40*one).ExpireAfter(10*time.Minute, clk.now)
	scanned := newCache(40*one).ExpireAfter(10*time.Minute, clk.now)
	users := []string{"alice", "bob", "carol", "dave"}
	rng := rand.New(rand.NewPCG(1, 2))
	all := func() []key {
		var ks []key
		for _, u := range users {
			for rev := range int64(4) {
				for id := range 4 {
					ks = append(ks, key{u, rev, id})
				}
			}
		}
		return ks
	}()
	for step := range 5000 {
		k := all[rng.IntN(len(all))]
		switch op := rng.IntN(10); {
		case op < 5:
			indexed.Put(k, "v")
			scanned.Put(k, "v")
		case op < 8:
			indexed.Get(k)
			scanned.Get(k)
		case op < 9:
			indexed.Forget("", k.user)
			scanned.Drop(func(o key) bool { return o.user == k.user })
			for _, o := range all { // read both alike: a read drops an expired entry
				scanned.Get(o)
				if _, held := indexed.Get(o); held && o.user == k.user {
					t.Fatalf("step %d: %v held after its user was forgotten", step, o)
				}
			}
		default:
			clk.t = clk.t.Add(time.Duration(rng.IntN(4)) * time.Minute)
		}
		if a, b := count(indexed), count(scanned); a != b {
			t.Fatalf("step %d: Forget holds %d entries, Drop %d", step, a, b)
		}
	}
	for _, k := range all {
		_, a := indexed.Get(k)
		_, b := scanned.Get(k)
		if a != b {
			t.Fatalf("%v held %v by Forget, %v by Drop", k, a, b)
		}
	}
	indexed.Clear()
	if n, bytes := indexed.Usage(); n != 0 || bytes != 0 {
		t.Fatalf("after Clear: %d entries, %d bytes", n, bytes)
	}
	indexed.Put(all[0], "v") // usable after Clear
	if _, held := indexed.Get(all[0]); !held {
		t.Fatal("a Put after Clear not held")
	}
}

// count is how many entries c holds.
func count(c *cache.Cache[key, string]) int { n, _ := c.Usage(); return n }

// TestPutSinceRefusesWhatAForgetOvertook: a value read before a Forget of
// its owner, a Drop or a Clear and put after it is not kept, and what its
// key held goes too; one read after them is.
func TestPutSinceRefusesWhatAForgetOvertook(t *testing.T) {
	c := newCache(1 << 20)
	k := key{user: "alice", rev: 1, id: 7}
	for name, forget := range map[string]func(){
		"forget": func() { c.Forget("", "alice") },
		"drop":   func() { c.Drop(func(key) bool { return false }) }, "clear": c.Clear,
	} {
		c.Put(k, "held")
		epoch := c.Epoch()
		forget()
		if c.PutSince(epoch, k, "read before") {
			t.Fatalf("%s: a value read before it was kept", name)
		}
		if v, ok := c.Get(k); ok {
			t.Fatalf("%s: %q still held under the key of a refused value", name, v)
		}
		if !c.PutSince(c.Epoch(), k, "read after") {
			t.Fatalf("%s: a value read after it was refused", name)
		}
	}
}

// TestPutSinceKeepsWhatAnotherOwnersForgetMissed: another owner's Forget
// (an erasure, a deletion, even of a conversation that does not exist)
// while a value was read neither refuses it nor drops what its key held,
// so that one tenant's deletions cannot keep the others' values out of
// the cache; once more owners were forgotten meanwhile than are recorded
// one by one, it is refused, as it may be of one of them.
func TestPutSinceKeepsWhatAnotherOwnersForgetMissed(t *testing.T) {
	c := newCache(1 << 20)
	k := key{user: "alice", rev: 1, id: 7}
	c.Put(k, "held")
	epoch := c.Epoch()
	c.Forget("", "bob")
	if v, ok := c.Get(k); !ok || v != "held" {
		t.Fatalf("alice's entry gone with bob's forget: %q, %v", v, ok)
	}
	if !c.PutSince(epoch, k, "read before") {
		t.Fatal("alice's value refused for bob's forget")
	}
	if v, _ := c.Get(k); v != "read before" {
		t.Fatalf("alice's key holds %q", v)
	}
	c.Forget("", "bob")
	if !c.PutSince(epoch, k, "bob forgotten twice") {
		t.Fatal("alice's value refused for bob's second forget")
	}

	epoch = c.Epoch()
	for i := range 5000 {
		c.Forget("", fmt.Sprint("user", i))
	}
	if c.PutSince(epoch, k, "read before many") {
		t.Fatal("a value read before more forgets than are recorded was kept")
	}
	if !c.PutSince(c.Epoch(), k, "read after") {
		t.Fatal("a value read after them was refused")
	}
}
