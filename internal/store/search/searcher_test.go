package search_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/search"
)

// sqlCalls records what a Searcher asked of its store's SQL, and answers
// each search with one item named after it.
type sqlCalls struct {
	calls []string
	terms []string
	text  string // the query text Text got
}

func (c *sqlCalls) searches(common bool, maxBytes int) search.SQLSearches {
	s := search.SQLSearches{
		Vector: func(context.Context, memory.ItemQuery) ([]memory.Item, error) {
			c.calls = append(c.calls, "vector")
			return []memory.Item{{Ref: "sql-vector"}}, nil
		},
		Text: func(_ context.Context, q memory.ItemQuery, terms []string) ([]memory.Item, error) {
			c.calls, c.terms, c.text = append(c.calls, "text"), terms, q.Text
			return []memory.Item{{Ref: "sql-text"}}, nil
		},
		MaxQueryBytes: maxBytes,
	}
	if common {
		s.Common = func(_ context.Context, _, _ string, terms []string, _ int, _ float64) ([]string, error) {
			c.calls = append(c.calls, "common")
			return terms[:1], nil
		}
	}
	return s
}

// fakeStore is an itemindex.Source (holding no turns) and a
// revision reader over fixed items of one user, every
// one an insert.
type fakeStore []memory.Item

var _ itemindex.Source = fakeStore(nil)

func (f fakeStore) ItemRevisions(context.Context, string, string) (memory.Revisions, error) {
	return memory.Revisions{Added: int64(len(f))}, nil
}

func (f fakeStore) Load(_ context.Context, key itemindex.Key, afterID int64, add func(int64, string, string, []byte, []float32) error) error {
	for _, it := range f {
		if key.Dims == 0 && it.ID > afterID {
			if err := add(it.ID, it.Conversation, it.Ref, []byte(it.Text), nil); err != nil {
				return err
			}
		} else if key.Dims > 0 && it.Model == key.Model && len(it.Embedding) == key.Dims && it.ID > afterID {
			if err := add(it.ID, it.Conversation, it.Ref, nil, slices.Clone(it.Embedding)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f fakeStore) LoadItems(_ context.Context, _, _ string, ids []int64) ([]memory.Item, error) {
	var out []memory.Item
	for _, it := range f {
		if slices.Contains(ids, it.ID) {
			it.Embedding = slices.Clone(it.Embedding)
			out = append(out, it)
		}
	}
	return out, nil
}

func (f fakeStore) LoadSaidAt(_ context.Context, _, _ string, ids []int64) (map[int64]time.Time, error) {
	out := map[int64]time.Time{}
	for _, it := range f {
		if slices.Contains(ids, it.ID) {
			out[it.ID] = it.SaidAt
		}
	}
	return out, nil
}

func fakeItem(id int64, ref, text string, v ...float32) memory.Item {
	return memory.Item{ID: id, Tenant: "acme", User: "alice", Conversation: "c1", Kind: "message", Ref: ref, Text: text,
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

// TestSearcherFallsBackOnSQL checks where each search is answered: by the
// index for a user it keeps, by the store's SQL for a user too large for
// it (ErrTooBig) or without an index, and by neither for a query that
// asks for nothing.
func TestSearcherFallsBackOnSQL(t *testing.T) {
	ctx := context.Background()
	f := fakeStore{fakeItem(1, "a", "porto porto", 1, 0), fakeItem(2, "b", "porto lisbon", 0, 1)}
	vq := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0}, Model: "m", Limit: 10}
	tq := memory.ItemQuery{Tenant: "acme", User: "alice", Text: "Porto?", Limit: 10}
	tiny := itemindex.Limits{Vectors: 4, Texts: 4, Items: 4}
	tests := []struct {
		name       string
		index      *itemindex.Index
		common     bool
		wantV      []string
		wantT      []string
		wantCommon []string
		wantCalls  []string
	}{
		{"index", itemindex.New(f, itemindex.DefaultLimits), true,
			[]string{"a", "b"}, []string{"a", "b"}, []string{"porto"}, nil},
		{"user too large", itemindex.New(f, tiny), true,
			[]string{"sql-vector"}, []string{"sql-text"}, []string{"porto"}, []string{"vector", "text", "common"}},
		{"user too large, no SQL statistics", itemindex.New(f, tiny), false,
			[]string{"sql-vector"}, []string{"sql-text"}, nil, []string{"vector", "text"}},
		{"no index", nil, true,
			[]string{"sql-vector"}, []string{"sql-text"}, []string{"porto"}, []string{"vector", "text", "common"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c sqlCalls
			s := search.NewSearcher(tt.index, c.searches(tt.common, 0), f.ItemRevisions)
			v, err := s.SearchVector(ctx, vq)
			if got := refsOf(t, v, err); !slices.Equal(got, tt.wantV) {
				t.Errorf("SearchVector = %v, want %v", got, tt.wantV)
			}
			tx, err := s.SearchText(ctx, tq)
			if got := refsOf(t, tx, err); !slices.Equal(got, tt.wantT) {
				t.Errorf("SearchText = %v, want %v", got, tt.wantT)
			}
			common, err := s.CommonTerms(ctx, nil, "acme", "alice", []string{"porto", "lisbon"}, 1, 0.9)
			if err != nil || !slices.Equal(common, tt.wantCommon) {
				t.Errorf("CommonTerms = %v, %v, want %v", common, err, tt.wantCommon)
			}
			if !slices.Equal(c.calls, tt.wantCalls) {
				t.Errorf("SQL calls = %v, want %v", c.calls, tt.wantCalls)
			}
		})
	}
}

// failingStore is a fakeStore whose reads of the index, and of the user's
// revisions when failRevs is set, fail.
type failingStore struct {
	fakeStore
	failRevs bool
}

var errRead = errors.New("read failed")

func (f failingStore) ItemRevisions(ctx context.Context, tenant, user string) (memory.Revisions, error) {
	if f.failRevs {
		return memory.Revisions{}, errRead
	}
	return f.fakeStore.ItemRevisions(ctx, tenant, user)
}

func (failingStore) Load(context.Context, itemindex.Key, int64, func(int64, string, string, []byte, []float32) error) error {
	return errRead
}

// TestSearcherFailsWithItsIndex: a read of the index (or of the user's
// revisions) that fails for another reason than a user too large fails the
// search with that error; the store's SQL is not asked instead.
func TestSearcherFailsWithItsIndex(t *testing.T) {
	ctx := context.Background()
	f := fakeStore{fakeItem(1, "a", "porto porto", 1, 0)}
	for _, failRevs := range []bool{false, true} {
		src := failingStore{f, failRevs}
		var c sqlCalls
		s := search.NewSearcher(itemindex.New(src, itemindex.DefaultLimits), c.searches(true, 0), src.ItemRevisions)
		_, errV := s.SearchVector(ctx, memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0}, Model: "m", Limit: 10})
		_, errT := s.SearchText(ctx, memory.ItemQuery{Tenant: "acme", User: "alice", Text: "Porto?", Limit: 10})
		_, errC := s.CommonTerms(ctx, nil, "acme", "alice", []string{"porto"}, 1, 0.5)
		for name, err := range map[string]error{"SearchVector": errV, "SearchText": errT, "CommonTerms": errC} {
			if !errors.Is(err, errRead) {
				t.Errorf("revisions fail %v: %s = %v, want the read's error", failRevs, name, err)
			}
		}
		if len(c.calls) != 0 {
			t.Errorf("revisions fail %v: SQL asked %v after a failed read of the index", failRevs, c.calls)
		}
	}
}

// TestSearcherQueriesForNothing checks the queries that find nothing
// without a search (an empty slice, not nil), the one that is invalid,
// and that MaxQueryBytes bounds the text split into terms.
func TestSearcherQueriesForNothing(t *testing.T) {
	ctx := context.Background()
	var c sqlCalls
	s := search.NewSearcher(nil, c.searches(true, 10), nil)
	id := memory.ItemQuery{Tenant: "acme", User: "alice"}
	for name, q := range map[string]memory.ItemQuery{
		"no embedding":   {Tenant: "acme", User: "alice", Limit: 5},
		"no limit":       {Tenant: "acme", User: "alice", Embedding: []float32{1}},
		"negative limit": {Tenant: "acme", User: "alice", Embedding: []float32{1}, Limit: -1},
	} {
		if items, err := s.SearchVector(ctx, q); err != nil || items == nil || len(items) != 0 {
			t.Errorf("SearchVector(%s) = %v, %v, want an empty slice", name, items, err)
		}
	}
	if _, err := s.SearchVector(ctx, memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 2}, Dims: 3, Limit: 1}); !errors.Is(err, memory.ErrInvalid) {
		t.Errorf("SearchVector with contradicting dims = %v, want memory.ErrInvalid", err)
	}
	for name, q := range map[string]memory.ItemQuery{
		"no words": {Tenant: "acme", User: "alice", Text: "?!", Limit: 5},
		"no limit": {Tenant: "acme", User: "alice", Text: "porto"},
	} {
		if items, err := s.SearchText(ctx, q); err != nil || items == nil || len(items) != 0 {
			t.Errorf("SearchText(%s) = %v, %v, want an empty slice", name, items, err)
		}
	}
	if out, err := s.CommonTerms(ctx, nil, id.Tenant, id.User, nil, 1, 0.5); err != nil || out != nil {
		t.Errorf("CommonTerms(no terms) = %v, %v, want none", out, err)
	}
	if len(c.calls) != 0 {
		t.Fatalf("queries for nothing reached SQL: %v", c.calls)
	}
	q := id
	q.Text, q.Limit = "porto lisbon madrid", 5 // 10 bytes end inside "lisbon"
	if _, err := s.SearchText(ctx, q); err != nil {
		t.Fatal(err)
	}
	if want := []string{"porto", "lisb"}; !slices.Equal(c.terms, want) {
		t.Fatalf("terms = %v, want %v (the text cut at 10 bytes)", c.terms, want)
	}
	if want := "porto lisb"; c.text != want {
		t.Fatalf("SQL searched the text %q, want %q (cut at 10 bytes)", c.text, want)
	}
	if out, err := s.MessagesAround(ctx, nil, "acme", "alice", []memory.MessageRef{{Conversation: "c1", Key: "k"}}, 1); err != nil || out == nil || len(out) != 0 {
		t.Fatalf("MessagesAround without windows = %v, %v, want an empty slice", out, err)
	}
}

func (fakeStore) ReadWindows(context.Context, string, string, []memory.MessageRef, int) (map[itemindex.WindowKey][]memory.Message, map[itemindex.WindowKey]bool, error) {
	return nil, nil, nil
}

// TestSearcherCollectors checks that a Searcher reports the metrics of
// every cache it reads (a store's Collectors are these), and none when it
// searches in SQL alone.
func TestSearcherCollectors(t *testing.T) {
	f := fakeStore{}
	tests := []struct {
		name string
		s    search.Searcher
		want []string // the caches named, sorted
	}{
		{"index", search.NewSearcher(itemindex.New(f, itemindex.DefaultLimits), search.SQLSearches{}, f.ItemRevisions),
			[]string{"items", "texts", "vectors", "windows"}},
		{"SQL alone", search.NewSearcher(nil, search.SQLSearches{}, nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			for _, c := range tt.s.Collectors() {
				if err := reg.Register(c); err != nil {
					t.Fatal(err)
				}
			}
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, mf := range families {
				for _, m := range mf.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "cache" && !slices.Contains(got, l.GetValue()) {
							got = append(got, l.GetValue())
						}
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("caches = %v, want %v", got, tt.want)
			}
		})
	}
}
