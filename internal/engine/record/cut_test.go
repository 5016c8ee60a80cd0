package record

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// countingStore is a SQLite store that records the most resent history
// (Prior) any save handed to it held.
type countingStore struct {
	*sqlite.Store
	mu       sync.Mutex
	maxPrior int
	saves    int
}

func (s *countingStore) count(exs ...memory.Exchange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ex := range exs {
		s.maxPrior, s.saves = max(s.maxPrior, len(ex.Prior)), s.saves+1
	}
}

func (s *countingStore) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	s.count(ex)
	return s.Store.SaveExchange(ctx, ex)
}

func (s *countingStore) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	s.count(exs...)
	return s.Store.SaveExchanges(ctx, exs)
}

// TestCaptureBoundsResentHistory: a full-history client of a derived
// conversation resending 20,000 messages, cut as its request's owner cuts
// it (memory.CutRequest), hands the store at most the history's first
// memory.BranchHead and keep newest messages, which
// are stored with the turn (the rest counted as left unstored); its next
// turn, resending everything again, stores exactly its 2 new messages, in
// order, nothing twice.
func TestCaptureBoundsResentHistory(t *testing.T) {
	const keep, long = 100, 20000
	store := &countingStore{Store: mustSQLite(t)}
	c := mustCapturer(t, store.Outbox(), store, nil, withStore(Options{}, store))
	id := memory.Identity{Tenant: "t1", User: "u1", Conversation: "chat-0123456789abcdef0123456789abcdef"}
	history := make([]memory.Message, 0, long+4)
	for i := range long {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		history = append(history, memory.Message{Role: role, Content: fmt.Sprint("message ", i)})
	}
	turn := func(n int) memory.Exchange {
		ex := exchange(t, fmt.Sprint("req-", n), fmt.Sprint("question ", n), fmt.Sprint("answer ", n))
		cut := memory.CutRequest(append(slices.Clone(history), ex.Turn...), keep)
		ex.Identity, ex.Prior, ex.Turn, ex.Skipped, ex.Derived = id, cut.Prior, cut.Turn, cut.Skipped, true
		ex.BranchSeed = memory.BranchSeed(id.Tenant, id.User, nil)
		return ex
	}
	stored := func() []memory.Message {
		t.Helper()
		msgs, err := store.Recent(context.Background(), id, 10*long)
		if err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	first := turn(1)
	c.Capture(context.Background(), first)
	if got, want := len(stored()), memory.BranchHead+keep+2; got != want {
		t.Fatalf("the first turn stored %d messages, want %d", got, want)
	}
	if got := value(t, c.metrics.cutMessages); got != long-memory.BranchHead-keep {
		t.Fatalf("counted %v messages left unstored, want %d", got, long-memory.BranchHead-keep)
	}
	history = append(history, first.Turn[0], first.Reply)
	second := turn(2)
	c.Capture(context.Background(), second)
	msgs := stored()
	if got, want := len(msgs), memory.BranchHead+keep+4; got != want {
		t.Fatalf("after the second turn the conversation holds %d messages, want %d", got, want)
	}
	want := []string{"question 1", "answer 1", "question 2", "answer 2"}
	if got := contentsOf(msgs[len(msgs)-4:]); !slices.Equal(got, want) {
		t.Fatalf("the conversation ends with %q, want %q", got, want)
	}
	if got := contentsOf(msgs[:3]); !slices.Equal(got, []string{"message 0", "message 1", "message 2"}) {
		t.Fatalf("the conversation starts with %q, want the history's first messages", got)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.saves < 2 || store.maxPrior > memory.BranchHead+keep {
		t.Fatalf("%d saves handed the store up to %d resent messages, want at most %d", store.saves, store.maxPrior, memory.BranchHead+keep)
	}
}

func contentsOf(msgs []memory.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Content
	}
	return out
}

// TestRouteLongHistoryThatBranches: two chats of one user that open
// alike, each resending 5,000 messages, with their histories cut by the
// Capturer: the first stays in its derived conversation turn after turn
// (its cut history is no false branch), the second, which parts from it
// at its third message, goes to the branch that parts there, turn after
// turn, and each conversation holds its chat's first messages, its cut
// newest and its own turns once.
func TestRouteLongHistoryThatBranches(t *testing.T) {
	const keep, long = 100, 5000
	st := newRoutingStore(mustSQLite(t))
	r := NewRouter(st, nil, nil, nil)
	c := mustCapturer(t, st.Outbox(), st, nil, Options{Batches: st, DeadLetters: st.Store, Adopter: st.Store, Router: r})
	derived := memory.Identity{Tenant: "acme", User: "ana", Conversation: "chat-0123456789abcdef0123456789abcdef"}
	chat := func(second string) []memory.Message {
		texts := make([]string, long)
		for i := range texts {
			texts[i] = fmt.Sprintf("%s message %d", second, i)
		}
		texts[0] = "hi" // both chats open alike
		return routeMsgs(texts...)
	}
	// send routes a request of msgs (system prompt first, ending with a
	// reply) and captures it as the Capturer would, returning where it went.
	send := func(msgs []memory.Message, n int) string {
		t.Helper()
		question := memory.Message{Role: "user", Content: fmt.Sprint("question ", n)}
		req := append(slices.Clone(msgs), question)
		cut := memory.CutRequest(req, keep) // once, as the proxy does
		routed, _, _ := r.Route(context.Background(), derived, req, cut)
		id := derived
		id.Conversation = routed.Conversation
		ex := memory.Exchange{ID: fmt.Sprint("req-", n), Identity: id, Model: "m", Prior: cut.Prior, Skipped: cut.Skipped,
			Turn: cut.Turn, Reply: memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", n)},
			Derived: true, Root: routed.Root, BranchSeed: routed.Seed}
		c.Capture(context.Background(), ex)
		return routed.Conversation
	}
	held := func(conv string) []memory.Message {
		t.Helper()
		id := derived
		id.Conversation = conv
		msgs, err := st.Recent(context.Background(), id, 10*long)
		if err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	a, b := chat("a"), chat("b")
	branch := memory.BranchConversation(derived.Tenant, derived.User, b, 2)
	for n := 1; n <= 3; n++ {
		if got := send(a, n); got != derived.Conversation {
			t.Fatalf("chat a's turn %d went to %q, want its derived conversation", n, got)
		}
		a = append(a, memory.Message{Role: "user", Content: fmt.Sprint("question ", n)}, memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", n)})
		if got := send(b, 10+n); got != branch {
			t.Fatalf("chat b's turn %d went to %q, want the branch %q", n, got, branch)
		}
		b = append(b, memory.Message{Role: "user", Content: fmt.Sprint("question ", 10+n)}, memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", 10+n)})
	}
	for _, tt := range []struct {
		conv string
		msgs []memory.Message
		last []string
	}{
		{derived.Conversation, a, []string{"question 1", "answer 1", "question 2", "answer 2", "question 3", "answer 3"}},
		{branch, b, []string{"question 11", "answer 11", "question 12", "answer 12", "question 13", "answer 13"}},
	} {
		got := held(tt.conv)
		if want := memory.BranchHead + keep + 6; len(got) != want {
			t.Fatalf("%s holds %d messages, want %d", tt.conv, len(got), want)
		}
		if !slices.Equal(contentsOf(got[:memory.BranchHead]), contentsOf(tt.msgs[1:memory.BranchHead+1])) {
			t.Fatalf("%s does not start with its chat's first messages", tt.conv)
		}
		if !slices.Equal(contentsOf(got[len(got)-6:]), tt.last) {
			t.Fatalf("%s ends with %q, want %q", tt.conv, contentsOf(got[len(got)-6:]), tt.last)
		}
		seen := map[string]bool{}
		for _, m := range got {
			if seen[m.Content] {
				t.Fatalf("%s holds %q twice", tt.conv, m.Content)
			}
			seen[m.Content] = true
		}
	}
}

// TestRouteComparesWhatTheSaveCompares: a history the Capturer stores
// whole is compared with its conversation message by message, however
// far back it parts; one its request's cut leaves messages out of
// (memory.CutRequest) is compared through its
// first memory.BranchHead messages only, as its save compares it.
func TestRouteComparesWhatTheSaveCompares(t *testing.T) {
	const keep = 100
	id := memory.Identity{Tenant: "acme", User: "ana", Conversation: "x"}
	texts := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint("m", i)
		}
		return out
	}
	at := memory.BranchHead + 34 // a user message past the head
	for _, tt := range []struct {
		name string
		n    int // messages the client resends before its question
		want func(client []memory.Message) string
	}{
		{"stored whole", memory.BranchHead + keep, func(client []memory.Message) string {
			return memory.BranchConversation(id.Tenant, id.User, client, at)
		}},
		{"cut", memory.BranchHead + keep + 2, func([]memory.Message) string { return "x" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			held := routeMsgs(texts(tt.n)...)[1:]
			edited := texts(tt.n)
			edited[at] = "edited"
			client := append(routeMsgs(edited...), memory.Message{Role: "user", Content: "and now?"})
			f := &fakeReader{convs: map[string][]memory.Message{"x": held}}
			if got, _, _ := NewRouter(f, nil, nil, nil).Route(context.Background(), id, client, memory.CutRequest(client, keep)); got.Conversation != tt.want(client) {
				t.Fatalf("Route = %q, want %q", got.Conversation, tt.want(client))
			}
		})
	}
}
