package recall

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// longHistory is an exchange resending n-2 messages of history before its
// turn and reply: about 67 bytes a message, so 3,000 of them are six times
// userEmbedBytes.
func longHistory(id memory.Identity, exID string, n int) memory.Exchange {
	prior := make([]memory.Message, n-2)
	for i := range prior {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		prior[i] = memory.Message{Role: role, Content: fmt.Sprintf("Message %d: we planned the garden party and lantern%d.", i, i)}
	}
	return memory.Exchange{ID: exID, Identity: id, At: time.Now(), Prior: prior,
		Turn:  []memory.Message{{Role: "user", Content: "And the music?"}},
		Reply: memory.Message{Role: "assistant", Content: "A string quartet."}}
}

// indexLongHistory indexes one exchange of longHistory's n messages (user
// t/u, conversation c) with an Indexer cutting texts by w, over a fake
// store and a recording local embedder.
func indexLongHistory(t *testing.T, w *Window, n int) (*fakeStore, *recordingEmbedder, *Indexer) {
	t.Helper()
	st, emb := newFakeStore(), &recordingEmbedder{Embedder: NewLocal(16)}
	ix := NewIndexer(st, emb, nil)
	ix.Window = w
	ex := longHistory(memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, "e1", n)
	if err := ix.AfterSave(context.Background(), ex, memory.SaveResult{Inserted: n}); err != nil {
		t.Fatal(err)
	}
	return st, emb, ix
}

// openTempSQLite opens a SQLite store in a file of its own, closed when t
// ends.
func openTempSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "memgate.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// saveIndexed stores ex in st and indexes it with ix, guarded by its time
// as the write path hands it to the hooks.
func saveIndexed(t *testing.T, st *sqlite.Store, ix *Indexer, ex memory.Exchange) {
	t.Helper()
	res, err := st.SaveExchange(context.Background(), ex)
	if err != nil {
		t.Fatal(err)
	}
	res.GuardSince = ex.At
	if err := ix.AfterSave(context.Background(), ex, res); err != nil {
		t.Fatal(err)
	}
}

// backfillAll runs Backfill until it reports nothing left, and returns
// how many items it embedded in all.
func backfillAll(t *testing.T, ix *Indexer) int {
	t.Helper()
	total := 0
	for range maxDeferredBytes/deferredItemBytes/backfillBatch + 1 {
		n, err := ix.Backfill(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return total
		}
		total += n
	}
	t.Fatalf("Backfill still reports work after %d items", total)
	return 0
}

// erasureHistory is how many messages the erasure tests' histories hold:
// about half again what one user's embedding budget embeds
// (userEmbedBytes), so the oldest ~150 wait for Backfill, message 3 (the
// one the tests search for) among them. The erasures below delete every
// message, and the full-text index's secure delete makes that the most
// expensive part of these tests under -race, so the histories are no longer
// than the budget needs.
const erasureHistory = 600

// mustDeferMessage3 fails the test unless ix holds, for Backfill, message 3
// of each of ids' longHistory (the message the erasure tests search for):
// without it, a backfill that wrote erased items back would go unseen.
func mustDeferMessage3(t *testing.T, ix *Indexer, ids ...memory.Identity) {
	t.Helper()
	ix.deferred.mu.Lock()
	defer ix.deferred.mu.Unlock()
	for _, id := range ids {
		found := false
		for _, it := range ix.deferred.items {
			if it.Tenant == id.Tenant && it.User == id.User && it.Conversation == id.Conversation && strings.HasPrefix(it.Text, "Message 3:") {
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("%s/%s: message 3 is not deferred: the history fits the budget and the test proves nothing", id.User, id.Conversation)
		}
	}
}

// What an exchange's embedding budget left without a vector waits in the
// indexer, and Backfill (the enricher's idle work) embeds it, newest
// first, upserting the same items: every message ends with a vector, each
// stored once.
func TestBackfillEmbedsWhatTheBudgetLeft(t *testing.T) {
	for _, tt := range indexerWindows {
		t.Run(tt.name, func(t *testing.T) {
			const n = 3000
			st, emb, ix := indexLongHistory(t, tt.w, n)
			embedded := len(emb.texts)
			if ix.Deferred() != n-embedded {
				t.Fatalf("%d items deferred, want the %d the budget left without a vector", ix.Deferred(), n-embedded)
			}
			emb.texts = nil
			if done := backfillAll(t, ix); done != n-embedded {
				t.Fatalf("backfilled %d items, want %d", done, n-embedded)
			}
			if ix.Deferred() != 0 {
				t.Fatalf("%d items still deferred", ix.Deferred())
			}
			// The newest of the messages left without a vector comes first.
			if want := fmt.Sprintf("Message %d:", n-embedded-1); len(emb.texts) == 0 || !strings.HasPrefix(emb.texts[0], want) {
				t.Fatalf("first text backfilled %q, want the newest left without a vector (%q…)", emb.texts[:min(1, len(emb.texts))], want)
			}
			stored := 0
			for _, it := range st.items {
				if it.Kind != KindMessage {
					continue
				}
				stored++
				if len(it.Embedding) == 0 || it.Model != emb.Model() {
					t.Fatalf("item %s has no vector after the backfill", it.Ref)
				}
			}
			if stored != n {
				t.Fatalf("%d message items stored, want %d (upserted, not added again)", stored, n)
			}
		})
	}
}

// What the per-message bound leaves without a vector (the tail of a
// pasted document, a hostile body) is not deferred: embedding it stays an
// operator's choice (`gateway reindex`), so one request cannot queue
// minutes of the encoder's idle time.
func TestBackfillLeavesTheTailOfALongMessage(t *testing.T) {
	st, emb := newFakeStore(), &recordingEmbedder{Embedder: NewLocal(16)}
	ix := NewIndexer(st, emb, nil)
	body := strings.Repeat("The quarterly report lists every supplier and the terms we agreed with each of them. ", 300)
	ex := memory.Exchange{ID: "e1", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, At: time.Now(),
		Turn:  []memory.Message{{Role: "user", Content: body}},
		Reply: memory.Message{Role: "assistant", Content: "Noted."}}
	if err := ix.AfterSave(context.Background(), ex, memory.SaveResult{Inserted: 2}); err != nil {
		t.Fatal(err)
	}
	textOnly := 0
	for _, it := range st.items {
		if len(it.Embedding) == 0 {
			textOnly++
		}
	}
	if textOnly == 0 {
		t.Fatalf("the %d-byte message has no chunk past the per-message bound: the test proves nothing", len(body))
	}
	if ix.Deferred() != 0 {
		t.Fatalf("%d items deferred, want none: the %d chunks without a vector are past the per-message bound", ix.Deferred(), textOnly)
	}
}

// Deferred items keep the erasure guard of the exchange they came from: a
// user erased, or a conversation deleted, between the indexing and the
// backfill stays erased (a real SQLite store checks the guard), while
// another user's deferred items get their vectors.
func TestBackfillDoesNotResurrectErasedMemory(t *testing.T) {
	t.Parallel() // its own SQLite file
	ctx := context.Background()
	st := openTempSQLite(t)
	const n = erasureHistory
	erased := memory.Identity{Tenant: "t", User: "erased", Conversation: "c"}
	deleted := memory.Identity{Tenant: "t", User: "kept", Conversation: "gone"}
	kept := memory.Identity{Tenant: "t", User: "kept", Conversation: "c"}
	emb := NewLocal(16)
	ix := NewIndexer(st, emb, nil)
	for i, id := range []memory.Identity{erased, deleted, kept} {
		ex := longHistory(id, fmt.Sprintf("e%d", i), n)
		res, err := st.SaveExchange(ctx, ex)
		if err != nil {
			t.Fatal(err)
		}
		res.GuardSince = ex.At // as the write path hands it to the hooks
		if err := ix.AfterSave(ctx, ex, res); err != nil {
			t.Fatal(err)
		}
	}
	mustDeferMessage3(t, ix, erased, deleted, kept)
	if err := st.DeleteUser(ctx, erased.Tenant, erased.User); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteConversation(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	backfillAll(t, ix)
	for _, id := range []memory.Identity{erased, deleted, kept} {
		hits, err := st.SearchText(ctx, memory.ItemQuery{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation, Text: "garden party lantern3", Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		if id != kept && len(hits) > 0 {
			t.Fatalf("%s/%s: %d items back after the erasure, first %q", id.User, id.Conversation, len(hits), hits[0].Text)
		}
		if id == kept && len(hits) == 0 {
			t.Fatal("the kept conversation's items are gone")
		}
	}
	left, err := st.ItemsToEmbed(ctx, emb.Model(), emb.Dims(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("%d items still without a vector after the backfill, first %s/%s %q", len(left), left[0].User, left[0].Conversation, left[0].Text)
	}
}

// The deferred items are bounded in bytes, and each keeps a copy of its
// text, not the whole message its chunk was cut from: a client sending
// long messages cannot make the wait hold more than maxDeferredBytes.
func TestDeferredItemsAreBounded(t *testing.T) {
	var d Deferred
	message := strings.Repeat("a long pasted message of many sentences. ", 50_000) // 2 MB
	chunk := message[:1000]
	cost := len(chunk) + deferredItemBytes
	// Each of five tenants defers more than the whole bound.
	const tenants = 5
	perTenant := 2 * maxDeferredBytes / cost
	for tn := range tenants {
		items := make([]memory.Item, perTenant)
		for i := range items {
			items[i] = memory.Item{Tenant: fmt.Sprint("t", tn), Ref: fmt.Sprint(i), Text: chunk}
		}
		kept := len(d.items)
		dropped := d.push(0, items)
		if dropped == 0 || d.bytes > maxDeferredBytes || d.byTenant[fmt.Sprint("t", tn)] > maxTenantDeferredBytes {
			t.Fatalf("tenant %d: dropped %d of %d, %d bytes in all, %d the tenant's: want the bounds of %d and %d held",
				tn, dropped, len(items), d.bytes, d.byTenant[fmt.Sprint("t", tn)], maxDeferredBytes, maxTenantDeferredBytes)
		}
		// The tenant's newest items are the ones kept, newest first.
		if n := len(d.items) - kept; tn < tenants-1 && n != maxTenantDeferredBytes/cost {
			t.Fatalf("tenant %d: kept %d items, want its share of %d", tn, n, maxTenantDeferredBytes/cost)
		}
		if len(d.items) > kept && d.items[kept].Ref != fmt.Sprint(perTenant-1) {
			t.Fatalf("tenant %d: first kept %s, want its newest (%d)", tn, d.items[kept].Ref, perTenant-1)
		}
	}
	if unsafe.StringData(d.items[0].Text) == unsafe.StringData(message) {
		t.Fatal("a deferred item shares its message's bytes: the whole message stays in memory")
	}
	// Taken in the order kept: the first tenant's first.
	got := d.pop(3)
	if len(got) != 3 || got[0].Tenant != "t0" || got[0].Ref != fmt.Sprint(perTenant-1) || got[2].Ref != fmt.Sprint(perTenant-3) {
		t.Fatalf("pop(3) = %+v, want the first tenant's three newest, newest first", got)
	}
	for len(d.items) > 0 {
		d.pop(backfillBatch)
	}
	if d.bytes != 0 || d.items != nil || len(d.byTenant) != 0 {
		t.Fatalf("drained: %d bytes counted, items %v, tenants %v", d.bytes, d.items != nil, d.byTenant)
	}
}

// A conversation deleted and then used again under the same name (a
// client that keeps its conversation id, or the default conversation of
// every chat without one) exists again when the backfill runs: the items
// deferred from before the deletion still must not come back, in either
// store's check.
func TestBackfillDoesNotResurrectARecreatedConversation(t *testing.T) {
	t.Parallel() // its own SQLite file
	for _, conv := range []string{"c", memory.DefaultConversation} {
		t.Run(conv, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := openTempSQLite(t)
			id := memory.Identity{Tenant: "t", User: "u", Conversation: conv}
			ix := NewIndexer(st, NewLocal(16), nil)
			ex := longHistory(id, "before", erasureHistory)
			res, err := st.SaveExchange(ctx, ex)
			if err != nil {
				t.Fatal(err)
			}
			res.GuardSince = ex.At
			if err := ix.AfterSave(ctx, ex, res); err != nil {
				t.Fatal(err)
			}
			mustDeferMessage3(t, ix, id)
			if err := st.DeleteConversation(ctx, id); err != nil {
				t.Fatal(err)
			}
			again := memory.Exchange{ID: "after", Identity: id, At: time.Now(),
				Turn:  []memory.Message{{Role: "user", Content: "A new start."}},
				Reply: memory.Message{Role: "assistant", Content: "Fine."}}
			if _, err := st.SaveExchange(ctx, again); err != nil {
				t.Fatal(err)
			}
			backfillAll(t, ix)
			hits, err := st.SearchText(ctx, memory.ItemQuery{Tenant: id.Tenant, User: id.User, Text: "garden party lantern3", Limit: 5})
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) > 0 {
				t.Fatalf("%d items of the deleted conversation back after the backfill, first %q", len(hits), hits[0].Text)
			}
		})
	}
}

// An erasure drops the user's vectors from the embedding cache, and what
// was deferred of the erased user does not fill it again: Backfill embeds
// none of it (the vectors would land in the cache, and be thrown away by
// the store), on the erasure after the deferral and on the indexing round
// that ran after the erasure (its items refused). Another user's deferred
// items are embedded.
func TestBackfillEmbedsNothingOfAnErasedUser(t *testing.T) {
	t.Parallel() // its own SQLite file
	ctx := context.Background()
	st := openTempSQLite(t)
	cache := NewEmbeddingCache(DefaultEmbeddingBytes)
	ix := NewIndexer(st, NewCached(NewLocal(16), cache, nil), nil)
	const n = erasureHistory
	erased := memory.Identity{Tenant: "t", User: "erased", Conversation: "c"}
	late := memory.Identity{Tenant: "t", User: "late", Conversation: "c"}
	kept := memory.Identity{Tenant: "t", User: "kept", Conversation: "c"}
	index := func(id memory.Identity, ex memory.Exchange, res memory.SaveResult) {
		t.Helper()
		res.GuardSince = ex.At // as the write path hands it to the hooks
		if err := ix.AfterSave(ctx, ex, res); err != nil {
			t.Fatal(err)
		}
	}
	saved := map[memory.Identity]memory.Exchange{}
	results := map[memory.Identity]memory.SaveResult{}
	for i, id := range []memory.Identity{erased, late, kept} {
		ex := longHistory(id, fmt.Sprintf("e%d", i), n)
		res, err := st.SaveExchange(ctx, ex)
		if err != nil {
			t.Fatal(err)
		}
		saved[id], results[id] = ex, res
	}
	index(erased, saved[erased], results[erased])
	index(kept, saved[kept], results[kept])
	mustDeferMessage3(t, ix, erased, kept)
	for _, id := range []memory.Identity{erased, late} {
		if err := st.DeleteUser(ctx, id.Tenant, id.User); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []memory.Identity{erased, late} {
		cache.Forget(id.Tenant, id.User) // as the erasure does (cache.Reads.DeleteUser)
	}
	// The late user's round runs after its erasure: its writes are refused.
	index(late, saved[late], results[late])
	backfillAll(t, ix)
	owners := map[string]int{}
	cache.Drop(func(k EmbeddingKey) bool { owners[k.User]++; return false })
	if owners["erased"] > 0 || owners["late"] > 0 {
		t.Fatalf("the embedding cache holds vectors of erased users after the backfill: %v", owners)
	}
	if owners["kept"] == 0 {
		t.Fatal("the kept user's deferred items were not embedded")
	}
}

// TestBackfillJudgesEachItemByItsOwnGuard: one backfill batch holding a
// user's items indexed before their erasure and items of history stored
// after it embeds the latter and drops the former. Each item is judged by
// its own erasure guard, not by the first item of its user.
func TestBackfillJudgesEachItemByItsOwnGuard(t *testing.T) {
	erasedAt := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	st := newFakeStore()
	st.erased = map[string]time.Time{"t/u": erasedAt}
	emb := &recordingEmbedder{Embedder: NewLocal(16)}
	ix := NewIndexer(st, emb, nil)
	item := func(text string, guard time.Time) memory.Item {
		return memory.Item{Tenant: "t", User: "u", Conversation: "c", Kind: "message", Ref: text, Text: text, GuardSince: guard}
	}
	ix.deferred.push(0, []memory.Item{
		item("said before the erasure", erasedAt.Add(-time.Hour)),
		item("said after the erasure", erasedAt.Add(time.Hour)),
	})
	if _, err := ix.Backfill(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(emb.texts) != 1 || emb.texts[0] != "said after the erasure" {
		t.Fatalf("backfill embedded %q, want only the item stored after the erasure", emb.texts)
	}
}

// A backfill batch crossing users whose embedding call one user's erasure
// (here a conversation delete's forget) cancels embeds the other users'
// items on their own: they get their vectors, the erased user's do not.
func TestBackfillEmbedsTheOthersAfterAnOwnersErasureMidBatch(t *testing.T) {
	t.Parallel() // its own SQLite file
	ctx := context.Background()
	st := openTempSQLite(t)
	erased := memory.Identity{Tenant: "t", User: "erased", Conversation: "c"}
	kept := memory.Identity{Tenant: "t", User: "kept", Conversation: "c"}
	deferred := NewDeferred()
	setup := NewIndexer(st, NewLocal(8), nil)
	setup.UseDeferred(deferred)
	for i, id := range []memory.Identity{erased, kept} {
		ex := longHistory(id, fmt.Sprintf("e%d", i), erasureHistory)
		res, err := st.SaveExchange(ctx, ex)
		if err != nil {
			t.Fatal(err)
		}
		res.GuardSince = ex.At
		if err := setup.AfterSave(ctx, ex, res); err != nil {
			t.Fatal(err)
		}
	}
	// Interleaved, so that a batch of the backfill crosses the two users.
	deferred.mu.Lock()
	var mixed []memory.Item
	var byUser [2][]memory.Item
	for _, it := range deferred.items {
		u := 0
		if it.User == kept.User {
			u = 1
		}
		byUser[u] = append(byUser[u], it)
	}
	for i := range max(len(byUser[0]), len(byUser[1])) {
		for u := range byUser {
			if i < len(byUser[u]) {
				mixed = append(mixed, byUser[u][i])
			}
		}
	}
	deferred.items = mixed
	deferred.mu.Unlock()
	g, calls := newGated(), cache.NewCalls()
	ix := NewIndexer(st, NewCached(g, NewEmbeddingCache(1<<20), calls), nil)
	ix.UseDeferred(deferred)
	unembedded := func() map[string]int {
		left, err := st.ItemsToEmbed(ctx, g.Model(), g.Dims(), 0, 10000)
		if err != nil {
			t.Fatal(err)
		}
		users := map[string]int{}
		for _, it := range left {
			users[it.User]++
		}
		return users
	}
	before := unembedded()
	done := make(chan error, 1)
	go func() { _, err := ix.Backfill(ctx); done <- err }()
	waitFor(t, "the backfill's embedding call", func() bool { _, n := g.count(""); return n == 1 })
	calls.Forget(erased.Tenant, erased.User)
	close(g.gate)
	if err := <-done; err != nil {
		t.Fatalf("backfill after one owner's erasure mid-batch: %v", err)
	}
	after := unembedded()
	if after[kept.User] >= before[kept.User] || after[erased.User] != before[erased.User] {
		t.Fatalf("items without a vector by user before the backfill %v, after %v: want fewer of the kept user's, as many of the erased user's", before, after)
	}
}
