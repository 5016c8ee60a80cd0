package record

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/redact"
	"github.com/memgate/memgate/internal/store/sqlite"
)

var (
	_ HeadReader = (*fakeReader)(nil)
	_ HeadReader = routingStore{}
)

// fakeReader holds conversations' live messages by conversation id.
type fakeReader struct {
	convs map[string][]memory.Message
	fail  map[string]bool // reads of these conversations fail
	reads []string
}

func (f *fakeReader) ItemRevisions(context.Context, string, string) (memory.Revisions, error) {
	return memory.Revisions{}, nil
}

func (f *fakeReader) Head(_ context.Context, _ *memory.Revisions, id memory.Identity, n int) ([]memory.Print, error) {
	f.reads = append(f.reads, id.Conversation)
	if f.fail[id.Conversation] {
		return nil, errDown
	}
	held := f.convs[id.Conversation]
	out := make([]memory.Print, 0, n)
	for _, m := range held[:min(len(held), n)] {
		out = append(out, m.Print())
	}
	return out, nil
}

// routingStore is a SQLite store read and written as the gateway wires
// the Router's: through the engine's cache of its reads (cache.Reads),
// which keeps conversations' first messages and sees every save and
// erasure.
type routingStore struct {
	*sqlite.Store
	reads *cache.Reads
}

func newRoutingStore(st *sqlite.Store) routingStore {
	return routingStore{Store: st, reads: cache.NewReads(st, nil, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)}
}

func (s routingStore) Head(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Print, error) {
	return s.reads.Head(ctx, rev, id, n)
}

func (s routingStore) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	return s.reads.SaveExchange(ctx, ex)
}

func (s routingStore) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	return s.reads.SaveExchanges(ctx, exs)
}

func (s routingStore) DeleteUser(ctx context.Context, tenant, user string) error {
	return s.reads.DeleteUser(ctx, tenant, user)
}

// fakeRedactor replaces "SECRET" with "[redacted]".
type fakeRedactor struct{}

func (fakeRedactor) Message(m memory.Message) (memory.Message, int, error) {
	n := strings.Count(m.Content, "SECRET")
	m.Content = strings.ReplaceAll(m.Content, "SECRET", "[redacted]")
	return m, n, nil
}

// routeMsgs builds a request's messages: a system prompt, then one
// message per text, alternating user and assistant.
func routeMsgs(texts ...string) []memory.Message {
	out := []memory.Message{{Role: "system", Content: "You are helpful."}}
	for i, s := range texts {
		out = append(out, memory.Message{Role: []string{"user", "assistant"}[i%2], Content: s})
	}
	return out
}

// TestRouterRoute states where Route sends a request of derived
// conversation "x": it stays while its messages and x's agree wherever
// both have one (x empty, the client going on, regenerating, or resending
// a secret or bytes x holds sanitized, or a reply otherwise than x holds
// it); it goes to the branch that parts
// where they first differ, then on through the branches that branch
// holds, at most maxBranchHops of them; a failed read leaves it where it
// got to. When x holds nothing, a chat an earlier memgate stored under
// the id it derived with the system prompt (memory.LegacyConversation)
// goes on there, or in that one's branches (with their seed,
// memory.LegacyBranchSeed), unless it holds another start; with no system
// prompt the two ids are one, and nothing more is read.
func TestRouterRoute(t *testing.T) {
	id := memory.Identity{Tenant: "acme", User: "ana", Conversation: "x"}
	branch := func(msgs []memory.Message, at int) string { return memory.BranchConversation("acme", "ana", msgs, at) }
	stored := func(msgs []memory.Message) []memory.Message { return msgs[1:] }
	a := routeMsgs("hi", "Hello!", "trip to Peru", "Nice.", "what shoes")
	b := routeMsgs("hi", "Hello!", "cover letter")
	bx := branch(b, 2)
	legacy := memory.LegacyConversation("acme", "ana", a)
	legacySeed := memory.LegacyBranchSeed("acme", "ana", a)
	lbx := memory.BranchOf(legacySeed, stored(b), 2)
	tests := []struct {
		name   string
		convs  map[string][]memory.Message
		fail   map[string]bool
		msgs   []memory.Message
		want   string
		reads  int
		legacy bool // routed from the legacy conversation
	}{
		{"empty derived conversation", nil, nil, b, "x", 2, false},
		{"going on", map[string][]memory.Message{"x": stored(a[:4])}, nil, a, "x", 1, false},
		{"regenerating the last answer", map[string][]memory.Message{"x": stored(a)}, nil, a[:4], "x", 1, false},
		{"another chat opening alike", map[string][]memory.Message{"x": stored(a)}, nil, b, bx, 2, false},
		{"that chat going on in its branch", map[string][]memory.Message{"x": stored(a), bx: stored(b)},
			nil, routeMsgs("hi", "Hello!", "cover letter", "Sure.", "for a nurse"), bx, 2, false},
		{"a branch of the branch", map[string][]memory.Message{"x": stored(a), bx: stored(routeMsgs("hi", "Hello!", "cover letter", "Sure.", "for a nurse", "Ok."))},
			nil, routeMsgs("hi", "Hello!", "cover letter", "Sure.", "for a teacher"), "", 3, false},
		{"a resent reply differing from the stored one", map[string][]memory.Message{"x": stored(a)}, nil,
			routeMsgs("hi", "Hello! ", "trip to Peru", "Nice.", "what shoes"), "x", 1, false},
		{"another chat, answered differently", map[string][]memory.Message{"x": stored(a)}, nil,
			routeMsgs("hi", "Hey.", "cover letter"), branch(routeMsgs("hi", "Hey.", "cover letter"), 2), 2, false},
		{"the first message differing", map[string][]memory.Message{"x": stored(a)}, nil, routeMsgs(" hi", "Hello!", "trip"), branch(routeMsgs(" hi"), 0), 2, false},
		{"a secret stored redacted", map[string][]memory.Message{"x": stored(routeMsgs("hi", "Hello!", "key [redacted]", "Got [redacted]."))},
			nil, routeMsgs("hi", "Hello!", "key SECRET", "Got SECRET.", "thanks"), "x", 1, false},
		{"bytes stored sanitized", map[string][]memory.Message{"x": stored(routeMsgs("hi", "caf\uFFFD"))},
			nil, routeMsgs("hi", "caf\xc3", "more"), "x", 1, false},
		{"the derived conversation unreadable", map[string][]memory.Message{"x": stored(a)}, map[string]bool{"x": true}, b, "x", 1, false},
		{"the branch unreadable", map[string][]memory.Message{"x": stored(a)}, map[string]bool{bx: true}, b, bx, 2, false},
		{"a chat an earlier memgate stored", map[string][]memory.Message{legacy: stored(a[:4])}, nil, a, legacy, 2, true},
		{"that chat regenerating", map[string][]memory.Message{legacy: stored(a)}, nil, a[:4], legacy, 2, true},
		{"another chat opening as that one", map[string][]memory.Message{legacy: stored(a)}, nil, b, lbx, 3, true},
		{"that chat going on in an earlier memgate's branch", map[string][]memory.Message{legacy: stored(a), lbx: stored(b)},
			nil, routeMsgs("hi", "Hello!", "cover letter", "Sure.", "for a nurse"), lbx, 3, true},
		{"the earlier conversation holding another start", map[string][]memory.Message{legacy: stored(routeMsgs("hey"))}, nil, a, "x", 2, false},
		{"the derived conversation holding the chat", map[string][]memory.Message{"x": stored(a[:4]), legacy: stored(a[:4])}, nil, a, "x", 1, false},
		{"the earlier conversation unreadable", map[string][]memory.Message{legacy: stored(a)}, map[string]bool{legacy: true}, a, "x", 2, false},
		{"no system prompt", map[string][]memory.Message{legacy: stored(a)}, nil, a[1:], "x", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeReader{convs: tt.convs, fail: tt.fail}
			got, _, _ := NewRouter(f, nil, fakeRedactor{}, nil).Route(context.Background(), id, tt.msgs, memory.CutRequest(tt.msgs, 0))
			want := memory.Routed{Conversation: cmp.Or(tt.want, branch(tt.msgs, 4)), Seed: memory.BranchSeed("acme", "ana", tt.msgs)}
			from := "x"
			if tt.legacy {
				from, want.Seed = legacy, legacySeed
			}
			if want.Conversation != from {
				want.Root = from
			}
			if got != want || len(f.reads) != tt.reads {
				t.Fatalf("Route = %+v after reading %q, want %+v after %d reads", got, f.reads, want, tt.reads)
			}
		})
	}
}

// TestRouterRouteEmpty states the routing order's last step: Route
// reports empty (a cut history may continue another conversation:
// Continued) only when, after the derived id and then the id an earlier
// memgate derived with the system prompt, where it routes holds nothing;
// a chat the earlier id holds goes on there, and a read that fails
// reports nothing empty.
func TestRouterRouteEmpty(t *testing.T) {
	id := memory.Identity{Tenant: "acme", User: "ana", Conversation: "x"}
	a := routeMsgs("hi", "Hello!", "trip to Peru", "Nice.", "what shoes")
	legacy := memory.LegacyConversation("acme", "ana", a)
	stored := func(msgs []memory.Message) []memory.Message { return msgs[1:] }
	for _, tt := range []struct {
		name  string
		convs map[string][]memory.Message
		fail  map[string]bool
		want  string
		empty bool
	}{
		{"nothing held under either id", nil, nil, "x", true},
		{"the derived conversation holding the chat", map[string][]memory.Message{"x": stored(a[:4])}, nil, "x", false},
		{"the earlier id holding the chat", map[string][]memory.Message{legacy: stored(a[:4])}, nil, legacy, false},
		{"the earlier id holding another start", map[string][]memory.Message{legacy: stored(routeMsgs("hey"))}, nil, "x", true},
		{"the derived conversation unreadable", nil, map[string]bool{"x": true}, "x", false},
		{"the earlier id unreadable", nil, map[string]bool{legacy: true}, "x", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeReader{convs: tt.convs, fail: tt.fail}
			got, _, empty := NewRouter(f, nil, nil, nil).Route(context.Background(), id, a, memory.CutRequest(a, 0))
			if got.Conversation != tt.want || empty != tt.empty {
				t.Fatalf("Route = %q, empty %v; want %q, empty %v", got.Conversation, empty, tt.want, tt.empty)
			}
		})
	}
}

// TestRouterBoundsHops: a history that parts from every branch it meets
// stops in the last of maxBranchHops branches, after maxBranchHops+1
// reads.
func TestRouterBoundsHops(t *testing.T) {
	id := memory.Identity{Tenant: "acme", User: "ana", Conversation: "x"}
	var texts []string
	for i := range 12 {
		texts = append(texts, fmt.Sprint("m", i))
	}
	client := routeMsgs(texts...)
	// Each conversation on the way holds the client's history up to one
	// message further than the last, then something else.
	f := &fakeReader{convs: map[string][]memory.Message{}}
	conv := "x"
	var path []string
	for hop := range maxBranchHops + 2 {
		held := append(append([]memory.Message(nil), client[1:hop+2]...), memory.Message{Role: "user", Content: "other"})
		if hop%2 == 1 {
			held[len(held)-1].Role = "assistant"
		}
		f.convs[conv] = held
		path = append(path, conv)
		conv = memory.BranchConversation("acme", "ana", client, hop+1)
	}
	got, _, _ := NewRouter(f, nil, nil, nil).Route(context.Background(), id, client, memory.CutRequest(client, 0))
	if got.Conversation != path[maxBranchHops] || len(f.reads) != maxBranchHops+1 {
		t.Fatalf("Route = %q after %d reads, want %q (branch %d) after %d", got.Conversation, len(f.reads), path[maxBranchHops], maxBranchHops, maxBranchHops+1)
	}
}

// TestRouterReroute: an exchange its conversation refused goes where
// Route sends its chat's next request (the request of its history and
// reply, one more turn), found from its derived conversation (its Root,
// else its own), Root naming that one when a branch; in the last branch,
// which it parts from too, it loses its BranchSeed (stored as an edit); a
// failed read leaves it unchanged.
func TestRouterReroute(t *testing.T) {
	id := memory.Identity{Tenant: "acme", User: "ana", Conversation: "x"}
	branch := func(msgs []memory.Message, at int) string { return memory.BranchConversation("acme", "ana", msgs, at) }
	stored := func(msgs []memory.Message) []memory.Message { return msgs[1:] }
	a := routeMsgs("hi", "Hello!", "trip to Peru", "Nice.")
	b := routeMsgs("hi", "Hello!", "cover letter", "Sure.")
	c := routeMsgs("hi", "Hello!", "cover letter", "Sure.", "for a nurse", "Ok.")
	bx := branch(b, 2)
	// exchangeOf is the exchange of request msgs (its last message the
	// reply) stored in conv.
	exchangeOf := func(msgs []memory.Message, conv, root string) memory.Exchange {
		rest := msgs[1:]
		ex := memory.Exchange{ID: "ex", Identity: id, Derived: true, Root: root, BranchSeed: memory.BranchSeed("acme", "ana", msgs),
			Prior: rest[:len(rest)-2], Turn: rest[len(rest)-2 : len(rest)-1], Reply: rest[len(rest)-1]}
		ex.Conversation = conv
		return ex
	}
	tests := []struct {
		name     string
		convs    map[string][]memory.Message
		fail     map[string]bool
		ex       memory.Exchange
		conv     string
		root     string
		guarded  bool
		wantFail bool
	}{
		{"from the derived conversation to a branch", map[string][]memory.Message{"x": stored(a)}, nil, exchangeOf(b, "x", ""), bx, "x", true, false},
		{"from a branch to a branch of it", map[string][]memory.Message{"x": stored(a), bx: stored(routeMsgs("hi", "Hello!", "cover letter", "Sure.", "for a teacher", "Ok."))},
			nil, exchangeOf(c, bx, "x"), branch(c, 4), "x", true, false},
		{"back to the derived conversation", map[string][]memory.Message{"x": stored(b)}, nil, exchangeOf(c, bx, "x"), "x", "", true, false},
		{"a failed read", map[string][]memory.Message{"x": stored(a)}, map[string]bool{"x": true}, exchangeOf(b, "x", ""), "x", "", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeReader{convs: tt.convs, fail: tt.fail}
			r := NewRouter(f, nil, nil, nil)
			got, err := r.Reroute(context.Background(), tt.ex)
			if (err != nil) != tt.wantFail || got.Conversation != tt.conv || got.Root != tt.root || (got.BranchSeed != "") != tt.guarded {
				t.Fatalf("Reroute = %q (root %q, seed %q), %v; want %q (root %q, guarded %v), failing %v",
					got.Conversation, got.Root, got.BranchSeed, err, tt.conv, tt.root, tt.guarded, tt.wantFail)
			}
			if tt.wantFail {
				return
			}
			// The chat's next request goes there too.
			next := append(append(routeMsgs(), tt.ex.Prior...), tt.ex.Turn[0], tt.ex.Reply, memory.Message{Role: "user", Content: "next"})
			f.fail = nil
			derived := id
			derived.Conversation = cmp.Or(tt.ex.Root, tt.ex.Conversation)
			if routed, _, _ := r.Route(context.Background(), derived, next, memory.CutRequest(next, 0)); routed.Conversation != got.Conversation {
				t.Fatalf("the chat's next request routed to %q, the exchange to %q", routed.Conversation, got.Conversation)
			}
		})
	}
	t.Run("the last branch", func(t *testing.T) {
		var texts []string
		for i := range 12 {
			texts = append(texts, fmt.Sprint("m", i))
		}
		client := routeMsgs(texts...)
		f := &fakeReader{convs: map[string][]memory.Message{}}
		conv := "x"
		var path []string
		for hop := range maxBranchHops + 2 {
			held := append(append([]memory.Message(nil), client[1:hop+2]...), memory.Message{Role: "user", Content: "other"})
			if hop%2 == 1 {
				held[len(held)-1].Role = "assistant"
			}
			f.convs[conv] = held
			path = append(path, conv)
			conv = memory.BranchConversation("acme", "ana", client, hop+1)
		}
		got, err := NewRouter(f, nil, nil, nil).Reroute(context.Background(), exchangeOf(client, "x", ""))
		if err != nil || got.Conversation != path[maxBranchHops] || got.BranchSeed != "" || got.Root != "x" {
			t.Fatalf("Reroute = %q (root %q, seed %q), %v; want the last branch %q, unguarded", got.Conversation, got.Root, got.BranchSeed, err, path[maxBranchHops])
		}
	})
	t.Run("an exchange without a seed", func(t *testing.T) {
		ex := exchangeOf(b, "x", "")
		ex.BranchSeed = ""
		f := &fakeReader{convs: map[string][]memory.Message{"x": stored(a)}}
		if got, err := NewRouter(f, nil, nil, nil).Reroute(context.Background(), ex); err != nil || got.Conversation != "x" || len(f.reads) != 0 {
			t.Fatalf("Reroute = %q, %v after %d reads; want it unchanged, unread", got.Conversation, err, len(f.reads))
		}
	})
}

// readThrough is a SQLite store read for routing without the engine's
// cache: every Route reads the conversation's first messages (as Route
// did before the cache kept them).
type readThrough struct{ *sqlite.Store }

func (s readThrough) Head(ctx context.Context, _ *memory.Revisions, id memory.Identity, n int) ([]memory.Print, error) {
	msgs, err := s.MessagesAfter(ctx, id, 0, n)
	out := make([]memory.Print, len(msgs))
	for i, m := range msgs {
		out[i] = m.Print()
	}
	return out, err
}

// BenchmarkRoute measures what routing adds to a headerless full-history
// request of a chat of n messages held in a SQLite store, going on: the
// user's revision counters read, the conversation's first n+1 live
// messages (read from the store, or kept by the engine's cache under those
// counters: memo) and the comparison (the client's messages equal the
// stored ones, so none is redacted).
func BenchmarkRoute(b *testing.B) {
	for _, n := range []int{40, 400} {
		for _, how := range []string{"read", "memo"} {
			b.Run(fmt.Sprint(n, "msgs/", how), func(b *testing.B) {
				st := mustSQLite(b)
				var texts []string
				for i := range n {
					texts = append(texts, fmt.Sprintf("message %d of a long chat about planning a trip to Peru in March, with details", i))
				}
				msgs := routeMsgs(texts...)
				var id memory.Identity
				for i := 1; i < len(msgs); i += 2 {
					ex := exchange(b, fmt.Sprint("ex-", i), msgs[i].Content, msgs[i+1].Content)
					id = ex.Identity
					if _, err := st.SaveExchange(context.Background(), ex); err != nil {
						b.Fatal(err)
					}
				}
				red, err := redact.New(nil)
				if err != nil {
					b.Fatal(err)
				}
				var reader HeadReader = readThrough{st}
				if how == "memo" {
					reader = newRoutingStore(st)
				}
				r := NewRouter(reader, nil, red, nil)
				client := append(msgs, memory.Message{Role: "user", Content: "what shoes should I pack"})
				b.ReportAllocs()
				for b.Loop() {
					if got, _, _ := r.Route(context.Background(), id, client, memory.CutRequest(client, 0)); got.Conversation != id.Conversation {
						b.Fatalf("Route = %q", got.Conversation)
					}
				}
			})
		}
	}
}
