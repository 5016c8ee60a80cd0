package contract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

func msg(role, content string) memory.Message { return memory.Message{Role: role, Content: content} }

func TestPlanSave(t *testing.T) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	turn := func(exID string, prior ...memory.Message) memory.Exchange {
		return memory.Exchange{ID: exID, Identity: id, Prior: prior,
			Turn: []memory.Message{msg("user", "q-"+exID)}, Reply: msg("assistant", "a-"+exID)}
	}
	// stored is a live branch u1 a1 u2 a2 at seqs 1..4.
	stored := func() *SaveConv {
		conv := &SaveConv{LastSeq: 4}
		for i, m := range []memory.Message{msg("user", "u1"), msg("assistant", "a1"), msg("user", "u2"), msg("assistant", "a2")} {
			m.Seq = int64(i + 1)
			conv.Tail = append(conv.Tail, m)
		}
		return conv
	}

	t.Run("dropped when erased at or after the exchange", func(t *testing.T) {
		for _, erased := range []time.Time{at, at.Add(time.Second)} {
			conv := stored()
			p := PlanSave(turn("e1"), at, erased, false, conv)
			if !p.Result.Dropped || p.Result.Inserted != 0 || conv.LastSeq != 4 {
				t.Fatalf("erased %v: plan %+v, last seq %d", erased, p, conv.LastSeq)
			}
		}
		if p := PlanSave(turn("e1"), at, at.Add(-time.Second), false, stored()); p.Result.Dropped {
			t.Fatal("an erasure before the exchange dropped it")
		}
	})
	t.Run("duplicate when stored, or planned before into the conversation", func(t *testing.T) {
		if p := PlanSave(turn("e1"), at, time.Time{}, true, stored()); !p.Result.Duplicate || p.Result.Inserted != 0 {
			t.Fatalf("stored: %+v", p)
		}
		conv := stored()
		if p := PlanSave(turn("e1"), at, time.Time{}, false, conv); p.Result.Inserted != 2 {
			t.Fatalf("first: %+v", p)
		}
		if p := PlanSave(turn("e1"), at, time.Time{}, false, conv); !p.Result.Duplicate || conv.LastSeq != 6 {
			t.Fatalf("again: %+v, last seq %d", p, conv.LastSeq)
		}
	})
	t.Run("appends after the last seq with keys, identity and times", func(t *testing.T) {
		conv := stored()
		ex := turn("e1")
		ex.Turn[0].CreatedAt = at.Add(-time.Minute)
		p := PlanSave(ex, at, time.Time{}, false, conv)
		want := []struct {
			seq int64
			key string
			at  time.Time
		}{{5, "e1:0", at.Add(-time.Minute)}, {6, "e1:1", at}}
		if p.Result.Inserted != 2 || p.SupersedeFrom != 0 || len(p.Result.Stored) != 2 {
			t.Fatalf("plan %+v", p)
		}
		for i, w := range want {
			m := p.Result.Stored[i]
			if m.Seq != w.seq || m.Key != w.key || !m.CreatedAt.Equal(w.at) || (memory.Identity{Tenant: m.Tenant, User: m.User, Conversation: m.Conversation}) != id {
				t.Errorf("message %d = %+v, want seq %d key %s at %v", i, m, w.seq, w.key, w.at)
			}
		}
		if conv.LastSeq != 6 || len(conv.Tail) != 6 || !conv.Latest.Equal(at) {
			t.Errorf("conv after: last seq %d, tail %d, latest %v", conv.LastSeq, len(conv.Tail), conv.Latest)
		}
	})
	t.Run("a resent history is aligned, the rest stored", func(t *testing.T) {
		conv := stored()
		p := PlanSave(turn("e1", msg("user", "u1"), msg("assistant", "a1"), msg("user", "u2"), msg("assistant", "a2"), msg("user", "new")),
			at, time.Time{}, false, conv)
		if p.SupersedeFrom != 0 || p.Result.Superseded != 0 || p.Result.Inserted != 3 || p.Result.Stored[0].Content != "new" {
			t.Fatalf("plan %+v", p)
		}
	})
	t.Run("an edited turn supersedes the branch after it", func(t *testing.T) {
		conv := stored()
		p := PlanSave(turn("e1", msg("user", "u1"), msg("assistant", "a1")), at, time.Time{}, false, conv)
		if p.SupersedeFrom != 3 || p.Result.Superseded != 2 || p.Result.Inserted != 2 || p.Result.Stored[0].Seq != 5 {
			t.Fatalf("plan %+v", p)
		}
		var live []string
		for _, m := range conv.Tail {
			live = append(live, m.Content)
		}
		if !slices.Equal(live, []string{"u1", "a1", "q-e1", "a-e1"}) {
			t.Fatalf("tail after = %v", live)
		}
	})
}

func TestItemChecksPlace(t *testing.T) {
	guard := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	item := func(user, conv, kind, ref string, guarded bool) memory.Item {
		it := memory.Item{Tenant: "acme", User: user, Conversation: conv, Kind: kind, Ref: ref}
		if guarded {
			it.GuardSince = guard
		}
		return it
	}
	items := []memory.Item{
		item("bob", "c1", "message", "k1", false),
		item("alice", "c1", "message", "k1", true),
		item("alice", "c2", "fact", "7", false),
		item("alice", memory.DefaultConversation, "message", "k2", false),
	}
	users, guards := ItemGuards(items)
	if !slices.Equal(users, []User{{"acme", "alice"}}) || !guards[User{"acme", "alice"}].Equal(guard) {
		t.Fatalf("ItemGuards = %v, %v", users, guards)
	}
	convs := GuardedConversations(items, guards)
	if !slices.Equal(convs, []memory.Identity{{Tenant: "acme", User: "alice", Conversation: "c1"}, {Tenant: "acme", User: "alice", Conversation: "c2"}}) {
		t.Fatalf("GuardedConversations = %v", convs)
	}
	if got := SupersededChecks(items); len(got) != 3 {
		t.Fatalf("SupersededChecks = %v", got)
	}
	if got := MovedChecks(items); len(got) != 1 || got[0].Key != "k2" {
		t.Fatalf("MovedChecks = %v", got)
	}
	if got := DerivedChecks(items, guards); len(got) != 1 || got[0].Ref != "7" {
		t.Fatalf("DerivedChecks = %v; want the guarded user's fact item", got)
	}
	// Nothing stored: the guarded user's message items are not live, the
	// unguarded user's are (an item indexed before its message is kept).
	gone := NotLive(items, guards, map[Source]bool{})
	if !gone[SourceOf(items[1])] || !gone[SourceOf(items[3])] || len(gone) != 2 {
		t.Fatalf("NotLive = %v; want alice's message items", gone)
	}
	tests := []struct {
		name   string
		checks ItemChecks
		it     memory.Item
		ok     bool
		conv   string
	}{
		{"guarded message not stored", ItemChecks{Superseded: gone}, items[1], false, ""},
		{"unguarded message not stored", ItemChecks{Superseded: gone}, items[0], true, "c1"},
		{"guarded message not stored, moved", ItemChecks{Superseded: gone, Moved: map[Source]string{SourceOf(items[3]): "chat"}}, items[3], true, "chat"},
		{"fact changed since read", ItemChecks{Stale: map[Source]bool{DerivedOf(items[2]): true}}, items[2], false, ""},
		{"a message is never stale", ItemChecks{Stale: map[Source]bool{DerivedOf(items[1]): true}}, items[1], true, "c1"},
		{"kept", ItemChecks{}, items[1], true, "c1"},
		{"user erased", ItemChecks{Erased: map[User]bool{{"acme", "alice"}: true}}, items[2], false, ""},
		{"conversation deleted", ItemChecks{Deleted: map[memory.Identity]bool{convs[1]: true}}, items[2], false, ""},
		{"message superseded", ItemChecks{Superseded: map[Source]bool{SourceOf(items[0]): true}}, items[0], false, ""},
		{"a fact is never superseded", ItemChecks{Superseded: map[Source]bool{SourceOf(items[2]): true}}, items[2], true, "c2"},
		{"message moved", ItemChecks{Moved: map[Source]string{SourceOf(items[3]): "chat"}}, items[3], true, "chat"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.checks.Place(tt.it)
			if ok != tt.ok || ok && got.Conversation != tt.conv {
				t.Fatalf("Place = %+v, %v; want ok %v in %q", got, ok, tt.ok, tt.conv)
			}
		})
	}
}

// fakeAdopt is an AdoptTx over a default conversation's live messages.
type fakeAdopt struct {
	live   []memory.Message
	starts []int64
	moved  []memory.Message
	asked  string // the candidate Candidates was asked for
}

func (f *fakeAdopt) Lock(context.Context, memory.Identity, memory.Identity) (bool, error) {
	return true, nil
}
func (f *fakeAdopt) Deleted(context.Context, memory.Identity) (time.Time, error) {
	return time.Time{}, nil
}
func (f *fakeAdopt) Candidates(_ context.Context, _ memory.Identity, candidate string) ([]int64, error) {
	f.asked = candidate
	return f.starts, nil
}
func (f *fakeAdopt) Live(_ context.Context, _ memory.Identity, seq int64, n int) ([]memory.Message, error) {
	i := slices.IndexFunc(f.live, func(m memory.Message) bool { return m.Seq >= seq })
	return f.live[i:min(len(f.live), i+n)], nil
}
func (f *fakeAdopt) Move(_ context.Context, _, _ memory.Identity, run []memory.Message) error {
	f.moved = run
	return nil
}

func TestAdoptMovesTheNewestMatchingRun(t *testing.T) {
	f := &fakeAdopt{starts: []int64{5, 3, 1}}
	for i, c := range []string{"x", "y", "hi", "hello", "other", "reply"} {
		role := []string{"user", "assistant"}[i%2]
		f.live = append(f.live, memory.Message{Seq: int64(i + 1), Key: fmt.Sprint("e", i/2, ":", i%2), Role: role, Content: c})
	}
	to := memory.Identity{Tenant: "acme", User: "alice", Conversation: "chat"}
	busy := false
	var txErr error // what the transaction's function returned: not nil rolls back
	candidate := ""
	adopt := func(to memory.Identity, prior ...memory.Message) (int, error) {
		f.moved, txErr = nil, nil
		return Adopt(context.Background(), to, candidate, prior, time.Time{}, func(context.Context) (bool, error) { return busy, nil },
			func(fn func(AdoptTx) error) error { txErr = fn(f); return txErr })
	}
	n, err := adopt(to, msg("user", "hi"), msg("assistant", "hello"), msg("user", "next"))
	if err != nil || n != 2 || len(f.moved) != 2 || f.moved[0].Seq != 3 || txErr != nil || f.asked != to.Conversation {
		t.Fatalf("Adopt = %d, %v; moved %+v, transaction %v, candidates of %q", n, err, f.moved, txErr, f.asked)
	}
	// A branch of a derived conversation adopts what was recorded with it.
	candidate = "chat-root"
	if n, err := adopt(to, msg("user", "hi"), msg("assistant", "hello")); err != nil || n != 2 || f.asked != candidate {
		t.Fatalf("Adopt with a candidate = %d, %v; candidates of %q, want %q", n, err, f.asked, candidate)
	}
	candidate = ""
	if n, err := adopt(to, msg("user", "nothing stored")); n != 0 || err != nil || f.moved != nil || txErr == nil {
		t.Fatalf("Adopt of an unknown history = %d, %v; moved %+v, transaction not rolled back", n, err, f.moved)
	}
	busy = true
	if n, err := adopt(to, msg("user", "hi"), msg("assistant", "hello")); n != 0 || err != nil || f.moved != nil {
		t.Fatalf("Adopt into a conversation with messages = %d, %v; moved %+v", n, err, f.moved)
	}
	busy = false
	def := to
	def.Conversation = memory.DefaultConversation
	if n, err := adopt(def, msg("user", "hi"), msg("assistant", "hello")); n != 0 || err != nil || f.moved != nil {
		t.Fatalf("Adopt into the default conversation = %d, %v; moved %+v", n, err, f.moved)
	}
	bad := to
	bad.User = "a/b"
	if _, err := adopt(bad, msg("user", "hi")); !errors.Is(err, memory.ErrInvalid) {
		t.Fatalf("Adopt for a bad id = %v, want memory.ErrInvalid", err)
	}
}

// TestContinued: a first turn is stored ahead when its candidate
// conversation, or a branch recorded with it, starts with its turn and
// reply.
func TestContinued(t *testing.T) {
	ex := memory.Exchange{ID: "e1", Identity: memory.Identity{Tenant: "acme", User: "alice", Conversation: memory.DefaultConversation},
		Candidate: "chat", Turn: []memory.Message{msg("user", "hi")}, Reply: msg("assistant", "hello")}
	turn := []memory.Message{msg("user", "hi"), msg("assistant", "hello"), msg("user", "more")}
	other := []memory.Message{msg("user", "hi"), msg("assistant", "hey"), msg("user", "more")}
	// continued runs Continued over conversations held by id, whose
	// branches recorded with "chat" are branches.
	continued := func(ex memory.Exchange, held map[string][]memory.Message, branches ...string) (bool, error) {
		return Continued(context.Background(), ex, func(_ context.Context, id memory.Identity, n int) ([]memory.Message, error) {
			stored := held[id.Conversation]
			return stored[:min(n, len(stored))], nil
		}, func(_ context.Context, _ memory.Identity, candidate string) ([]string, error) {
			if candidate != "chat" {
				t.Fatalf("branches of %q, want the candidate's", candidate)
			}
			return branches, nil
		})
	}
	tests := []struct {
		name     string
		held     map[string][]memory.Message
		branches []string
		want     bool
	}{
		{"the candidate", map[string][]memory.Message{"chat": turn}, nil, true},
		{"the candidate holding the turn alone", map[string][]memory.Message{"chat": turn[:1]}, nil, false},
		{"a branch", map[string][]memory.Message{"chat": other, "b2": turn}, []string{"b1", "b2"}, true},
		{"neither", map[string][]memory.Message{"chat": other, "b1": other}, []string{"b1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ok, err := continued(ex, tt.held, tt.branches...); ok != tt.want || err != nil {
				t.Fatalf("Continued = %v, %v, want %v", ok, err, tt.want)
			}
		})
	}
	ex.Candidate = ""
	if ok, _ := continued(ex, map[string][]memory.Message{"chat": turn}); ok {
		t.Fatal("an exchange without a candidate continued")
	}
}
