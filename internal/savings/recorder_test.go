package savings

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// fakeStore sums what is added, failing while down.
type fakeStore struct {
	mu   sync.Mutex
	down bool
	got  map[string]memory.SavingsBucket
}

func (f *fakeStore) AddSavings(_ context.Context, bs []memory.SavingsBucket) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errors.New("store down")
	}
	for _, b := range bs {
		k := b.Tenant + "@" + b.Start.Format(time.RFC3339)
		cur := f.got[k]
		cur.Tenant, cur.Start = b.Tenant, b.Start
		cur.Requests += b.Requests
		cur.TokensOriginal += b.TokensOriginal
		cur.TokensSent += b.TokensSent
		cur.Degraded += b.Degraded
		cur.TokensRepeated += b.TokensRepeated
		cur.TokensCached += b.TokensCached
		f.got[k] = cur
	}
	return nil
}

type prepFunc func(ctx context.Context, req memory.Request) (memory.Prepared, error)

func (p prepFunc) Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error) {
	return p(ctx, req)
}

func TestRecorderCountsPerTenantAndBucketAndSurvivesAStoreOutage(t *testing.T) {
	st := &fakeStore{got: map[string]memory.SavingsBucket{}}
	now := time.Date(2026, 1, 1, 10, 3, 0, 0, time.UTC)
	r := New(st, 5*time.Minute, func() time.Time { return now }, slog.New(slog.DiscardHandler))
	ok := prepFunc(func(context.Context, memory.Request) (memory.Prepared, error) {
		return memory.Prepared{Messages: []json.RawMessage{[]byte(`{}`)}, TokensOriginal: 1000, TokensSent: 250}, nil
	})
	failing := prepFunc(func(context.Context, memory.Request) (memory.Prepared, error) {
		return memory.Prepared{}, errors.New("timeout")
	})
	acme := memory.Request{Identity: memory.Identity{Tenant: "acme"}}
	r.Wrap(ok).Prepare(context.Background(), acme)
	r.Wrap(ok).Prepare(context.Background(), acme)
	r.Wrap(failing).Prepare(context.Background(), acme)
	r.Wrap(ok).Prepare(context.Background(), memory.Request{Identity: memory.Identity{Tenant: "beta"}})
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	r.Wrap(ok).Prepare(expired, acme) // outlived its deadline: forwarded without memory

	r.Repeated("acme", 120)
	r.Cached("acme", 64)
	r.Repeated("beta", 0) // nothing to count: no bucket

	st.down = true
	if err := r.Flush(context.Background()); err == nil {
		t.Fatal("Flush succeeded with the store down")
	}
	now = now.Add(5 * time.Minute)
	r.Wrap(ok).Prepare(context.Background(), acme)
	st.down = false
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(context.Background()); err != nil { // nothing pending: adds nothing
		t.Fatal(err)
	}
	want := map[string]memory.SavingsBucket{
		"acme@2026-01-01T10:00:00Z": {Requests: 2, TokensOriginal: 2000, TokensSent: 500, Degraded: 2, TokensRepeated: 120, TokensCached: 64},
		"beta@2026-01-01T10:00:00Z": {Requests: 1, TokensOriginal: 1000, TokensSent: 250},
		"acme@2026-01-01T10:05:00Z": {Requests: 1, TokensOriginal: 1000, TokensSent: 250},
	}
	if len(st.got) != len(want) {
		t.Fatalf("stored %+v", st.got)
	}
	for k, w := range want {
		g := st.got[k]
		if g.Requests != w.Requests || g.TokensOriginal != w.TokensOriginal || g.TokensSent != w.TokensSent || g.Degraded != w.Degraded ||
			g.TokensRepeated != w.TokensRepeated || g.TokensCached != w.TokensCached {
			t.Errorf("%s = %+v, want %+v", k, g, w)
		}
	}
}

func TestRunFlushesAtTheEnd(t *testing.T) {
	st := &fakeStore{got: map[string]memory.SavingsBucket{}}
	r := New(st, 0, nil, slog.New(slog.DiscardHandler))
	r.Record("acme", memory.Prepared{TokensOriginal: 10, TokensSent: 5})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx, time.Hour); close(done) }()
	cancel()
	<-done
	if len(st.got) != 1 {
		t.Fatalf("stored %+v after Run ended", st.got)
	}
}
