package itemindex_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
)

// fakeStore is an in-memory itemindex.Source that counts its reads. Its
// writers move the revisions as the stores' triggers do.
type fakeStore struct {
	itemindex.Source // nil: no turns (ReadWindows)
	mu               sync.Mutex
	items            []memory.Item // by id
	nextID           int64
	rev              map[[2]string]memory.Revisions
	// reads counts calls per method; afterIDs records Load's afterID
	// arguments, and loaded LoadItems' ids.
	reads    map[string]int
	afterIDs []int64
	loaded   []int64
}

var _ itemindex.Source = (*fakeStore)(nil)

func newFakeStore() *fakeStore {
	return &fakeStore{rev: map[[2]string]memory.Revisions{}, reads: map[string]int{}}
}

func (f *fakeStore) add(items ...memory.Item) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, it := range items {
		f.nextID++
		it.ID = f.nextID
		f.items = append(f.items, it)
		k := [2]string{it.Tenant, it.User}
		r := f.rev[k]
		r.Added++
		f.rev[k] = r
	}
}

// change applies fn to the item of id and counts a change for its user.
func (f *fakeStore) change(id int64, fn func(*memory.Item)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.items {
		if f.items[i].ID == id {
			fn(&f.items[i])
			k := [2]string{f.items[i].Tenant, f.items[i].User}
			r := f.rev[k]
			r.Changed++
			f.rev[k] = r
		}
	}
}

// redate sets the time said of the item of id and counts it for its user,
// as the stores' triggers do for an update of that alone.
func (f *fakeStore) redate(id int64, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.items {
		if f.items[i].ID == id {
			f.items[i].SaidAt = at
			k := [2]string{f.items[i].Tenant, f.items[i].User}
			r := f.rev[k]
			r.Dated++
			f.rev[k] = r
		}
	}
}

// remove deletes the user's items, keeping the revisions.
func (f *fakeStore) remove(tenant, user string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items = slices.DeleteFunc(f.items, func(it memory.Item) bool { return it.Tenant == tenant && it.User == user })
	k := [2]string{tenant, user}
	r := f.rev[k]
	r.Changed++
	f.rev[k] = r
}

func (f *fakeStore) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[method]
}

// revs reads the user's (of acme) Revisions, as a request does once
// before its searches.
func (f *fakeStore) revs(t testing.TB, user string) memory.Revisions {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev[[2]string{"acme", user}]
}

func (f *fakeStore) Load(_ context.Context, key itemindex.Key, afterID int64, add func(int64, string, string, []byte, []float32) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.afterIDs = append(f.afterIDs, afterID)
	if key.Dims == 0 {
		f.reads["texts"]++
		for _, it := range f.items {
			if it.Tenant == key.Tenant && it.User == key.User && it.ID > afterID {
				if err := add(it.ID, it.Conversation, it.Ref, []byte(it.Text), nil); err != nil {
					return err
				}
			}
		}
		return nil
	}
	f.reads["vectors"]++
	for _, it := range f.items {
		if it.Tenant == key.Tenant && it.User == key.User && it.Model == key.Model && len(it.Embedding) == key.Dims && it.ID > afterID {
			if err := add(it.ID, it.Conversation, it.Ref, nil, slices.Clone(it.Embedding)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f *fakeStore) LoadItems(_ context.Context, _, _ string, ids []int64) ([]memory.Item, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads["items"]++
	f.loaded = append(f.loaded, ids...)
	var out []memory.Item
	for _, it := range f.items {
		if slices.Contains(ids, it.ID) {
			it.Embedding = slices.Clone(it.Embedding)
			out = append(out, it)
		}
	}
	return out, nil
}

func (f *fakeStore) LoadSaidAt(_ context.Context, _, _ string, ids []int64) (map[int64]time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads["times"]++
	out := map[int64]time.Time{}
	for _, it := range f.items {
		if slices.Contains(ids, it.ID) {
			out[it.ID] = it.SaidAt
		}
	}
	return out, nil
}

// takeAfterIDs returns and forgets the afterIDs recorded.
func (f *fakeStore) takeAfterIDs() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.afterIDs
	f.afterIDs = nil
	return a
}

func fakeItem(user, ref, text string, v ...float32) memory.Item {
	return memory.Item{Tenant: "acme", User: user, Conversation: "c1", Kind: "message", Ref: ref, Text: text,
		Embedding: v, Model: "m", Dims: len(v)}
}

func refsOf(t *testing.T, items []memory.Item, err error) []string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Ref
	}
	return out
}

// TestIndexReadsOnlyWhatChanged checks what each search reads: one
// revisions lookup when nothing changed, the rows above the highest id
// held after inserts, everything after a change, and whole items only for
// ids not held at the current change count.
func TestIndexReadsOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	f := newFakeStore()
	x := itemindex.New(f, itemindex.DefaultLimits)
	vq := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0}, Model: "m", Limit: 10}
	tq := memory.ItemQuery{Tenant: "acme", User: "alice", Limit: 10}
	terms := []string{"porto"}
	search := func(step string, wantV, wantT []string, afterIDs []int64) {
		t.Helper()
		v, err := x.SearchVector(ctx, f.revs(t, "alice"), vq)
		if got := refsOf(t, v, err); !slices.Equal(got, wantV) {
			t.Fatalf("%s: SearchVector = %v, want %v", step, got, wantV)
		}
		tx, err := x.SearchText(ctx, f.revs(t, "alice"), tq, terms)
		if got := refsOf(t, tx, err); !slices.Equal(got, wantT) {
			t.Fatalf("%s: SearchText = %v, want %v", step, got, wantT)
		}
		if got := f.takeAfterIDs(); !slices.Equal(got, afterIDs) {
			t.Fatalf("%s: loaded rows above %v, want %v", step, got, afterIDs)
		}
	}
	f.add(fakeItem("alice", "a", "porto", 1, 0), fakeItem("alice", "b", "porto porto lisbon", 1, 1))
	search("first", []string{"a", "b"}, []string{"a", "b"}, []int64{0, 0})
	items := f.count("items")
	search("unchanged", []string{"a", "b"}, []string{"a", "b"}, nil)
	if n := f.count("items"); n != items {
		t.Fatalf("unchanged: %d item reads, want none", n-items)
	}
	f.add(fakeItem("alice", "c", "porto", 1, 0.1), fakeItem("bob", "x", "porto", 1, 0))
	search("inserts", []string{"a", "c", "b"}, []string{"a", "c", "b"}, []int64{2, 2})
	f.change(2, func(it *memory.Item) { it.Text, it.Embedding = "lisbon", []float32{0, 1} })
	search("a change", []string{"a", "c", "b"}, []string{"a", "c"}, []int64{0, 0})
	f.remove("acme", "alice")
	search("erased", []string{}, []string{}, []int64{0, 0})
	// As many items as before the erasure: read again, not taken for the
	// ones held.
	f.add(fakeItem("alice", "n1", "porto", 1, 0), fakeItem("alice", "n2", "porto", 1, 0), fakeItem("alice", "n3", "porto", 1, 0))
	search("after the erasure", []string{"n1", "n2", "n3"}, []string{"n1", "n2", "n3"}, []int64{0, 0})
}

// TestIndexRedatedItemsOnly checks that an update of an item's time said
// alone (a fact stated again) reads the times of the items searches
// return again, and neither the items, the vectors nor the full-text
// index.
func TestIndexRedatedItemsOnly(t *testing.T) {
	ctx := context.Background()
	f := newFakeStore()
	x := itemindex.New(f, itemindex.DefaultLimits)
	vq := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0}, Model: "m", Limit: 10}
	tq := memory.ItemQuery{Tenant: "acme", User: "alice", Limit: 10}
	f.add(fakeItem("alice", "a", "porto", 1, 0), fakeItem("alice", "b", "porto lisbon", 1, 1))
	said := func(step string, want int64) {
		t.Helper()
		v, err := x.SearchVector(ctx, f.revs(t, "alice"), vq)
		if err != nil || len(v) != 2 || v[0].Ref != "a" || v[0].SaidAt.Unix() != want {
			t.Fatalf("%s: SearchVector = %+v, %v; want a said at %d first", step, v, err, want)
		}
		tx, err := x.SearchText(ctx, f.revs(t, "alice"), tq, []string{"porto"})
		if err != nil || len(tx) != 2 || tx[0].Ref != "a" || tx[0].SaidAt.Unix() != want {
			t.Fatalf("%s: SearchText = %+v, %v; want a said at %d first", step, tx, err, want)
		}
	}
	said("first", time.Time{}.Unix())
	f.takeAfterIDs()
	items, times := f.count("items"), f.count("times")
	f.redate(1, time.Unix(5000, 0))
	said("redated", 5000)
	if got := f.takeAfterIDs(); len(got) != 0 {
		t.Fatalf("redated: vectors or texts read again (rows above %v)", got)
	}
	if n := f.count("items") - items; n != 0 {
		t.Fatalf("redated: the items were read again (%d reads)", n)
	}
	if n := f.count("times") - times; n != 1 {
		t.Fatalf("redated: the times were read %d times, want once", n)
	}
	said("redated, held", 5000)
	if n := f.count("times") - times; n != 1 {
		t.Fatalf("redated twice: the times were read %d times, want once", n)
	}
}

// TestIndexKeysByTheRevisionsGiven checks that what a search finds is
// current as of the Revisions its caller read: searches given the same
// Revisions read no rows, and a change is seen by the first search given
// the Revisions read after it, never before (the caller's request reads
// them once, before its searches).
func TestIndexKeysByTheRevisionsGiven(t *testing.T) {
	ctx := context.Background()
	f := newFakeStore()
	x := itemindex.New(f, itemindex.DefaultLimits)
	vq := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0}, Model: "m", Limit: 10}
	tq := memory.ItemQuery{Tenant: "acme", User: "alice", Limit: 10}
	request := func(step string, want []string, reads int) {
		t.Helper()
		rev := f.revs(t, "alice")
		before := f.count("vectors") + f.count("texts")
		for range 2 {
			v, err := x.SearchVector(ctx, rev, vq)
			if got := refsOf(t, v, err); !slices.Equal(got, want) {
				t.Fatalf("%s: SearchVector = %v, want %v", step, got, want)
			}
			tx, err := x.SearchText(ctx, rev, tq, []string{"porto"})
			if got := refsOf(t, tx, err); !slices.Equal(got, want) {
				t.Fatalf("%s: SearchText = %v, want %v", step, got, want)
			}
		}
		if n := f.count("vectors") + f.count("texts") - before; n != reads {
			t.Fatalf("%s: %d row reads for one request's four searches, want %d", step, n, reads)
		}
	}
	f.add(fakeItem("alice", "a", "porto", 1, 0))
	request("first", []string{"a"}, 2)
	request("unchanged", []string{"a"}, 0)
	f.add(fakeItem("alice", "b", "porto", 1, 0))
	request("after an insert", []string{"a", "b"}, 2)
	f.remove("acme", "alice")
	request("after the erasure", []string{}, 2)
}

// TestIndexFilters checks the conversation, excluded refs, model and
// dimension filters, and that a zero vector never matches.
func TestIndexFilters(t *testing.T) {
	ctx := context.Background()
	f := newFakeStore()
	x := itemindex.New(f, itemindex.DefaultLimits)
	other := fakeItem("alice", "other-conv", "porto", 1, 0)
	other.Conversation = "c2"
	model := fakeItem("alice", "other-model", "porto", 1, 0)
	model.Model = "m2"
	f.add(fakeItem("alice", "a", "porto", 3, 4), fakeItem("alice", "zero", "porto", 0, 0), other, model,
		fakeItem("alice", "three", "porto", 1, 0, 0))
	refs := func(items []memory.Item, err error) []string {
		t.Helper()
		return refsOf(t, items, err)
	}
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0}, Model: "m", Limit: 10}
	items, err := x.SearchVector(ctx, f.revs(t, "alice"), q)
	if got := refsOf(t, items, err); !slices.Equal(got, []string{"other-conv", "a"}) || items[1].Score < 0.5999 || items[1].Score > 0.6001 {
		t.Fatalf("SearchVector = %v (%+v), want other-conv, then a scoring 0.6", got, items)
	}
	q.Conversation = "c1"
	if got := refs(x.SearchVector(ctx, f.revs(t, "alice"), q)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("conversation c1: %v", got)
	}
	q.Conversation, q.ExcludeRefs = "", []string{"a"}
	if got := refs(x.SearchVector(ctx, f.revs(t, "alice"), q)); !slices.Equal(got, []string{"other-conv"}) {
		t.Fatalf("a excluded: %v", got)
	}
	tq := memory.ItemQuery{Tenant: "acme", User: "alice", Conversation: "c2", Limit: 10}
	if got := refs(x.SearchText(ctx, f.revs(t, "alice"), tq, []string{"Pörto"})); !slices.Equal(got, []string{"other-conv"}) {
		t.Fatalf("text in c2: %v", got)
	}
}

// TestIndexTooBig checks a user past a quarter of a cache's bound gets
// ErrTooBig from that cache, while a small user is still served.
func TestIndexTooBig(t *testing.T) {
	ctx := context.Background()
	f := newFakeStore()
	x := itemindex.New(f, itemindex.Limits{Vectors: 4096, Texts: 4096, Items: 1 << 20})
	for i := range 300 {
		f.add(fakeItem("big", fmt.Sprint("r", i), fmt.Sprintf("porto word%d", i), 1, float32(i)))
	}
	f.add(fakeItem("small", "s", "porto", 1, 0))
	for _, user := range []string{"big", "small"} {
		rev := f.revs(t, user)
		_, verr := x.SearchVector(ctx, rev, memory.ItemQuery{Tenant: "acme", User: user, Embedding: []float32{1, 0}, Model: "m", Limit: 3})
		_, terr := x.SearchText(ctx, rev, memory.ItemQuery{Tenant: "acme", User: user, Limit: 3}, []string{"porto"})
		_, cerr := x.CommonTerms(ctx, rev, "acme", user, []string{"porto"}, 1, 0.5)
		for _, err := range []error{verr, terr, cerr} {
			if big := errors.Is(err, itemindex.ErrTooBig); big != (user == "big") || (err != nil && !big) {
				t.Fatalf("%s: %v", user, err)
			}
		}
	}
	if keys, bytes := x.VectorUsage(); keys == 0 || bytes > 4096 {
		t.Fatalf("vector cache: %d keys, %d bytes; bound 4096", keys, bytes)
	}
}

// TestIndexConcurrentSearches searches from many goroutines while items
// are added and changed, and checks every search ends at the final state.
// Run it with -race.
func TestIndexConcurrentSearches(t *testing.T) {
	ctx := context.Background()
	f := newFakeStore()
	x := itemindex.New(f, itemindex.DefaultLimits)
	vq := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0}, Model: "m", Limit: 100}
	tq := memory.ItemQuery{Tenant: "acme", User: "alice", Limit: 100}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := x.SearchVector(ctx, f.revs(t, "alice"), vq); err != nil {
					t.Error(err)
					return
				}
				if _, err := x.SearchText(ctx, f.revs(t, "alice"), tq, []string{"porto"}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range 50 {
		f.add(fakeItem("alice", fmt.Sprint("r", i), "porto", 1, float32(i%5)))
		if i%7 == 6 {
			f.change(int64(i), func(it *memory.Item) { it.Text = "lisbon" })
		}
	}
	close(done)
	wg.Wait()
	v, err := x.SearchVector(ctx, f.revs(t, "alice"), vq)
	if err != nil || len(v) != 50 {
		t.Fatalf("SearchVector after the writes: %d items, %v", len(v), err)
	}
	tx, err := x.SearchText(ctx, f.revs(t, "alice"), tq, []string{"porto"})
	if err != nil || len(tx) != 50-7 {
		t.Fatalf("SearchText after the writes: %d items, %v; want %d", len(tx), err, 50-7)
	}
}

// TestSearchItemsAreCopies checks a caller changing a returned item, or
// appending to its embedding, changes nothing the next search returns.
func TestSearchItemsAreCopies(t *testing.T) {
	ctx := context.Background()
	f := newFakeStore()
	x := itemindex.New(f, itemindex.DefaultLimits)
	f.add(fakeItem("alice", "a", "porto", 1, 0))
	for i := range 3 {
		v, err := x.SearchVector(ctx, f.revs(t, "alice"), memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0}, Model: "m", Limit: 1})
		if err != nil || len(v) != 1 || v[0].Embedding[0] != 1 || v[0].Ref != "a" {
			t.Fatalf("search %d: %+v, %v", i, v, err)
		}
		v[0].Ref, v[0].Score = "changed", 0
		if e := append(v[0].Embedding, 7); &e[0] == &v[0].Embedding[0] {
			t.Fatalf("search %d: an append wrote into the cached embedding's array", i)
		}
		tx, err := x.SearchText(ctx, f.revs(t, "alice"), memory.ItemQuery{Tenant: "acme", User: "alice", Model: "m", Dims: 2, Limit: 1}, []string{"porto"})
		if err != nil || len(tx) != 1 || tx[0].Embedding[0] != 1 || tx[0].Ref != "a" {
			t.Fatalf("text search %d: %+v, %v", i, tx, err)
		}
		tx[0].Ref = "changed"
	}
}

// TestForgetDropsTheUsersEntries checks that Forget (an erasure) leaves
// nothing of the user in memory, and the other users' entries held.
func TestForgetDropsTheUsersEntries(t *testing.T) {
	ctx := context.Background()
	f := newFakeStore()
	x := itemindex.New(f, itemindex.DefaultLimits)
	f.add(fakeItem("alice", "a", "porto", 1, 0), fakeItem("bob", "b", "porto", 1, 0))
	search := func(user string) {
		t.Helper()
		q := memory.ItemQuery{Tenant: "acme", User: user, Embedding: []float32{1, 0}, Model: "m", Limit: 10}
		if v, err := x.SearchVector(ctx, f.revs(t, user), q); err != nil || len(v) != 1 {
			t.Fatalf("%s: SearchVector = %v, %v", user, v, err)
		}
	}
	search("alice")
	search("bob")
	if keys, _ := x.VectorUsage(); keys != 2 {
		t.Fatalf("vector sets held = %d, want 2", keys)
	}
	x.Forget("acme", "alice")
	if keys, _ := x.VectorUsage(); keys != 1 {
		t.Fatalf("after Forget: vector sets held = %d, want bob's alone", keys)
	}
	items := f.count("items")
	search("bob")
	if n := f.count("items") - items; n != 0 {
		t.Fatalf("bob's items read again (%d reads) after alice was forgotten", n)
	}
}
