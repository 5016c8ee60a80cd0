package record

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/redact"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// TestImportKeepsIDsAndTimesAndIsIdempotent imports dated history into
// SQLite twice: the first time every exchange is stored, in order, with the
// caller's ids, redacted, each message with its own time, and queued for
// enrichment; the second time every exchange is a duplicate and nothing is
// stored again.
func TestImportKeepsIDsAndTimesAndIsIdempotent(t *testing.T) {
	store := mustSQLite(t)
	r, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	enrich := newFakeQueue()
	c := mustCapturer(t, store.Outbox(), store, r, withStore(Options{Enrich: enrich}, store))
	secret := "AKIA" + "IOSFODNN7EXAMPLE"
	said := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	var exs []memory.Exchange
	for i := range 5 {
		ex := exchange(t, fmt.Sprintf("im-%d", i), fmt.Sprintf("question %d %s", i, secret), fmt.Sprintf("answer %d", i))
		ex.At = said.Add(time.Duration(i) * time.Hour)
		ex.Turn[0].CreatedAt = ex.At
		ex.Reply.CreatedAt = ex.At.Add(time.Minute)
		exs = append(exs, ex)
	}
	outcomes, err := c.Import(context.Background(), exs)
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Repeat([]Outcome{Stored}, 5); !slices.Equal(outcomes, want) {
		t.Fatalf("first import outcomes %v, want %v", outcomes, want)
	}
	id := memory.Identity{Tenant: "t1", User: "u1", Conversation: "c1"}
	msgs, err := store.Recent(context.Background(), id, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 10 {
		t.Fatalf("stored %d messages, want 10", len(msgs))
	}
	for i, m := range msgs {
		ex := exs[i/2]
		wantAt, wantKey := ex.At, memory.Key(ex.ID, 0)
		if i%2 == 1 {
			wantAt, wantKey = ex.At.Add(time.Minute), memory.Key(ex.ID, 1)
		}
		if m.Key != wantKey || !m.CreatedAt.Equal(wantAt) {
			t.Errorf("message %d: key %s at %v, want %s at %v", i, m.Key, m.CreatedAt, wantKey, wantAt)
		}
		if strings.Contains(m.Content, secret) {
			t.Errorf("message %d: the secret reached the store: %q", i, m.Content)
		}
	}
	waitFor(t, "5 exchanges queued for enrichment", func() bool { return len(enrich.payloads()) == 5 })

	outcomes, err = c.Import(context.Background(), exs)
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Repeat([]Outcome{Duplicate}, 5); !slices.Equal(outcomes, want) {
		t.Fatalf("second import outcomes %v, want %v", outcomes, want)
	}
	if msgs, _ := store.Recent(context.Background(), id, 100); len(msgs) != 10 {
		t.Fatalf("after the second import %d messages, want 10", len(msgs))
	}
	// A duplicate goes to enrichment again (its hooks are idempotent, and
	// it may have been stored by a run that died before enriching it),
	// marked as such.
	waitFor(t, "the duplicates queued for enrichment", func() bool { return len(enrich.payloads()) == 10 })
	for _, p := range enrich.payloads()[5:] {
		if !strings.Contains(string(p), `"Duplicate":true`) {
			t.Errorf("re-imported exchange queued for enrichment as new: %.300s", p)
		}
	}
}

// TestImportReportsErasedQueuedAndRefused checks the other outcomes: an
// exchange dated before its user's erasure is Erased; with the store down,
// exchanges go to the capture queue (Queued); an exchange without an id is
// refused before anything is stored.
func TestImportReportsErasedQueuedAndRefused(t *testing.T) {
	t.Run("erased", func(t *testing.T) {
		store := mustSQLite(t)
		c := mustCapturer(t, nil, store, nil, withStore(Options{}, store))
		if err := store.DeleteUser(context.Background(), "t1", "u1"); err != nil {
			t.Fatal(err)
		}
		before := exchange(t, "im-old", "old question", "old answer")
		before.At = time.Now().Add(-24 * time.Hour)
		after := exchange(t, "im-new", "new question", "new answer")
		after.At = time.Now().Add(time.Second)
		outcomes, err := c.Import(context.Background(), []memory.Exchange{before, after})
		if err != nil {
			t.Fatal(err)
		}
		if want := []Outcome{Erased, Stored}; !slices.Equal(outcomes, want) {
			t.Fatalf("outcomes %v, want %v", outcomes, want)
		}
	})
	t.Run("queued", func(t *testing.T) {
		q, s := newFakeQueue(), newFakeSaver()
		s.setFail(fmt.Errorf("store down: %w", memory.ErrUnavailable))
		c := mustCapturer(t, q, s, nil, Options{})
		outcomes, err := c.Import(context.Background(), []memory.Exchange{exchange(t, "im-1", "q", "a")})
		if err != nil {
			t.Fatal(err)
		}
		if want := []Outcome{Queued}; !slices.Equal(outcomes, want) {
			t.Fatalf("outcomes %v, want %v", outcomes, want)
		}
		if p := q.payloads(); len(p) != 1 || !strings.Contains(string(p[0]), `"id":"im-1"`) {
			t.Fatalf("capture queue holds %q, want the exchange with its id", p)
		}
	})
	t.Run("no id", func(t *testing.T) {
		s := newFakeSaver()
		c := mustCapturer(t, nil, s, nil, Options{})
		ex := exchange(t, "", "q", "a")
		if _, err := c.Import(context.Background(), []memory.Exchange{ex}); !errors.Is(err, memory.ErrInvalid) {
			t.Fatalf("Import without an id: %v, want ErrInvalid", err)
		}
		if len(s.ids()) != 0 {
			t.Fatalf("stored %v", s.ids())
		}
	})
}

// heldSQLite is a SQLite store whose saves wait, once entered, until the
// test lets them go on: an erasure can land while an import is stored.
type heldSQLite struct {
	*sqlite.Store
	entered, release chan struct{}
}

func (h heldSQLite) hold() {
	select {
	case h.entered <- struct{}{}:
	default:
	}
	<-h.release
}

func (h heldSQLite) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	h.hold()
	return h.Store.SaveExchange(ctx, ex)
}

func (h heldSQLite) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	h.hold()
	return h.Store.SaveExchanges(ctx, exs)
}

// TestImportDuringAnErasureIsErased: an import that began before its
// user's erasure imports history said before it, even when its
// timestamps run a little ahead of the gateway's clock (the import
// accepts up to 5 minutes of skew): the erasure, landing while the
// import is stored, drops it all, and nothing of the user is stored
// after the erasure returned.
func TestImportDuringAnErasureIsErased(t *testing.T) {
	store := mustSQLite(t)
	held := heldSQLite{Store: store, entered: make(chan struct{}, 1), release: make(chan struct{})}
	c := mustCapturer(t, nil, held, nil, withStore(Options{}, held))
	ex := exchange(t, "im-ahead", "my address is 5 Rua Augusta", "noted")
	ex.At = time.Now().Add(2 * time.Minute) // the importing client's clock runs ahead
	ex.Turn[0].CreatedAt, ex.Reply.CreatedAt = ex.At, ex.At

	type result struct {
		outcomes []Outcome
		err      error
	}
	done := make(chan result, 1)
	go func() {
		o, err := c.Import(context.Background(), []memory.Exchange{ex})
		done <- result{o, err}
	}()
	<-held.entered
	if err := store.DeleteUser(context.Background(), ex.Tenant, ex.User); err != nil {
		t.Fatal(err)
	}
	close(held.release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := []Outcome{Erased}; !slices.Equal(r.outcomes, want) {
		t.Errorf("outcomes %v, want %v", r.outcomes, want)
	}
	if msgs, err := store.Recent(context.Background(), ex.Identity, 10); err != nil || len(msgs) > 0 {
		t.Fatalf("after the erasure the user has %d messages stored (%v): the import brought them back", len(msgs), err)
	}
}
