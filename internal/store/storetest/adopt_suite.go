package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// AdoptStore is a store that moves a full-history chat's first turns from
// the user's default conversation into the chat's derived conversation
// (capture.Adopter).
type AdoptStore interface {
	KnowledgeStore
	// Its saves record the chat an exchange is of (memory.CandidateOf),
	// each in its own transaction.
	//
	// Adopt moves into to, when it holds no message yet, the exchanges of
	// the user's default conversation recorded with candidate (to's own
	// conversation when "") that prior starts with (memory.Adoptable), in
	// one transaction: messages (renumbered from 1, keys kept), recall
	// items, exchange records; it returns how many messages moved. It
	// moves nothing into a conversation deleted at or after received (the
	// continuation's memory.Exchange.Received; zero: no deletion stops it).
	// Under a hold of the chat's lock (fence not zero) it moves only while
	// that hold holds it (RunChatLockLost); a zero fence is not checked.
	Adopt(ctx context.Context, to memory.Identity, candidate string, prior []memory.Message, received time.Time, fence memory.Fence) (int, error)
	// Continued reports whether ex's candidate conversation, or a branch
	// recorded with it, starts with ex's turn and reply, by fingerprint.
	Continued(ctx context.Context, ex memory.Exchange) (bool, error)
}

// RunAdopt runs the Adopt contract suite. open must return a fresh, empty
// store for every call.
func RunAdopt(t *testing.T, open func(t *testing.T) AdoptStore) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s AdoptStore)
	}{
		{"MovesFirstTurnsOnce", testAdoptMoves},
		{"BranchAdoptsByItsRoot", testAdoptIntoBranch},
		{"OnlyWhatMatches", testAdoptOnlyWhatMatches},
		{"RedeliveredMovedExchangeIsDuplicate", testAdoptRedelivered},
		{"NothingAfterErasure", testAdoptAfterErasure},
		{"NothingIntoADeletedConversation", testAdoptIntoDeleted},
		{"ContinuationStoredFirst", testContinued},
		{"ContinuationStoredFirstInABranch", testContinuedInBranch},
		{"LateIndexFollowsTheMove", testAdoptLateIndex},
		{"IndexBacklogFollowsTheMove", testAdoptIndexBacklog},
		{"FactSourcesFollowTheMove", testAdoptMovesFactSources},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, open(t))
		})
	}
}

const adoptTo = "chat-0123456789abcdef0123456789abcdef"

// firstTurn is a headerless full-history chat's first exchange, stored in
// the user's default conversation with candidate adoptTo (recorded by the
// save).
func firstTurn(t *testing.T, s AdoptStore, user string) memory.Exchange {
	t.Helper()
	def := memory.Identity{Tenant: "acme", User: user, Conversation: memory.DefaultConversation}
	ex := exchange(def, "ex-first-"+user, 1, nil, []memory.Message{msg(t, "user", "Hi, I am Ana.")}, msg(t, "assistant", "Hello Ana!"))
	ex.Candidate = adoptTo
	mustSave(t, s, ex)
	return ex
}

// continuation is the chat's second turn, resending the first.
func continuation(t *testing.T, user string) memory.Exchange {
	ex := exchange(memory.Identity{Tenant: "acme", User: user, Conversation: adoptTo}, "ex-second-"+user, 3,
		[]memory.Message{msg(t, "user", "Hi, I am Ana."), msg(t, "assistant", "Hello Ana!")},
		[]memory.Message{msg(t, "user", "I live in Lisbon.")}, msg(t, "assistant", "Nice city."))
	ex.Derived = true
	return ex
}

func mustAdopt(t *testing.T, s AdoptStore, to memory.Identity, prior []memory.Message, want int) {
	t.Helper()
	mustAdoptFrom(t, s, to, "", prior, want)
}

func mustAdoptFrom(t *testing.T, s AdoptStore, to memory.Identity, candidate string, prior []memory.Message, want int) {
	t.Helper()
	n, err := s.Adopt(testCtx(t), to, candidate, prior, time.Time{}, 0)
	if err != nil || n != want {
		t.Fatalf("Adopt = %d, %v; want %d moved", n, err, want)
	}
}

// testAdoptMoves: the first turn moves out of default (a newest-only
// exchange stored there after it stays), with its recall item; the
// continuation then stores only what is new; every turn is stored once, in
// order, Seq from 1.
func testAdoptMoves(t *testing.T, s AdoptStore) {
	first := firstTurn(t, s, "ana")
	def := first.Identity
	other := exchange(def, "ex-other", 2, nil, []memory.Message{msg(t, "user", "What time is it?")}, msg(t, "assistant", "Noon."))
	mustSave(t, s, other)
	mustAddItems(t, s, item(def, "message", memory.Key(first.ID, 0), "Hi, I am Ana.", nil))

	next := continuation(t, "ana")
	mustAdopt(t, s, next.Identity, next.Prior, 2)
	mustAdopt(t, s, next.Identity, next.Prior, 0) // the conversation holds messages now
	res := mustSave(t, s, next)
	if res.Inserted != 2 || res.Superseded != 0 {
		t.Fatalf("continuation saved %+v, want its turn and reply only", res)
	}
	conv, msgs := mustConversation(t, s, next.Identity)
	assertContents(t, "derived conversation", msgs, []string{"user:Hi, I am Ana.", "assistant:Hello Ana!", "user:I live in Lisbon.", "assistant:Nice city."})
	assertLiveOrder(t, next.Identity, conv, msgs)
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Fatalf("message %d has Seq %d, want %d", i, m.Seq, i+1)
		}
	}
	if msgs[0].Key != memory.Key(first.ID, 0) {
		t.Fatalf("moved message key %q, want %q kept", msgs[0].Key, memory.Key(first.ID, 0))
	}
	dconv, dmsgs := mustConversation(t, s, def)
	assertContents(t, "default conversation", dmsgs, []string{"user:What time is it?", "assistant:Noon."})
	if dconv.MessageCount != 2 || conv.MessageCount != 4 {
		t.Fatalf("message counts default %d, derived %d; want 2 and 4", dconv.MessageCount, conv.MessageCount)
	}
	got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "ana", Conversation: adoptTo, Text: "Ana", Limit: 5})
	if len(got) != 1 || got[0].Conversation != adoptTo {
		t.Fatalf("the moved message's item = %+v, want it in %s", got, adoptTo)
	}
	if got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "ana", Conversation: memory.DefaultConversation, Text: "Ana", Limit: 5}); len(got) != 0 {
		t.Fatalf("the moved message's item still in default: %+v", got)
	}
}

// testAdoptIntoBranch: a continuation routed to a branch of the derived
// conversation (memory.BranchConversation: another chat opened the same
// way) adopts the first turn recorded with the derived conversation when
// asked for that candidate, not for its own id; the derived conversation
// itself, holding the other chat, is untouched.
func testAdoptIntoBranch(t *testing.T, s AdoptStore) {
	first := firstTurn(t, s, "ana")
	derived := memory.Identity{Tenant: "acme", User: "ana", Conversation: adoptTo}
	mustSave(t, s, exchange(derived, "ex-other-chat", 2, nil, []memory.Message{msg(t, "user", "Hi, I am Ana.")}, msg(t, "assistant", "Hi!")))
	next := continuation(t, "ana")
	next.Conversation, next.Root = "chat-fedcba9876543210fedcba9876543210", adoptTo
	mustAdoptFrom(t, s, next.Identity, "", next.Prior, 0)
	mustAdoptFrom(t, s, next.Identity, next.Root, next.Prior, 2)
	if res := mustSave(t, s, next); res.Inserted != 2 || res.Superseded != 0 {
		t.Fatalf("continuation saved %+v, want its turn and reply only", res)
	}
	_, msgs := mustConversation(t, s, next.Identity)
	assertContents(t, "branch", msgs, []string{"user:Hi, I am Ana.", "assistant:Hello Ana!", "user:I live in Lisbon.", "assistant:Nice city."})
	if msgs[0].Key != memory.Key(first.ID, 0) {
		t.Fatalf("moved message key %q, want %q kept", msgs[0].Key, memory.Key(first.ID, 0))
	}
	_, dmsgs := mustConversation(t, s, derived)
	assertContents(t, "derived conversation", dmsgs, []string{"user:Hi, I am Ana.", "assistant:Hi!"})
	assertNotFound(t, s, first.Identity)
}

// testAdoptOnlyWhatMatches: nothing moves when the resent history differs
// from the recorded exchange, when the candidate names another
// conversation, or when the target already holds messages.
func testAdoptOnlyWhatMatches(t *testing.T, s AdoptStore) {
	first := firstTurn(t, s, "ana")
	next := continuation(t, "ana")
	edited := slices.Clone(next.Prior)
	edited[1] = msg(t, "assistant", "Hi there!")
	mustAdopt(t, s, next.Identity, edited, 0)
	mustAdopt(t, s, memory.Identity{Tenant: "acme", User: "ana", Conversation: "chat-ffffffffffffffffffffffffffffffff"}, next.Prior, 0)
	mustAdopt(t, s, memory.Identity{Tenant: "acme", User: "bob", Conversation: adoptTo}, next.Prior, 0)
	busy := memory.Identity{Tenant: "acme", User: "ana", Conversation: adoptTo}
	mustSave(t, s, exchange(busy, "ex-busy", 2, nil, []memory.Message{msg(t, "user", "Hi, I am Ana.")}, msg(t, "assistant", "Hello Ana!")))
	mustAdopt(t, s, busy, next.Prior, 0)
	_, dmsgs := mustConversation(t, s, first.Identity)
	assertContents(t, "default conversation", dmsgs, []string{"user:Hi, I am Ana.", "assistant:Hello Ana!"})
}

// testAdoptRedelivered: a redelivered capture of a moved exchange is a
// duplicate: it is not stored in default again.
func testAdoptRedelivered(t *testing.T, s AdoptStore) {
	first := firstTurn(t, s, "ana")
	next := continuation(t, "ana")
	mustAdopt(t, s, next.Identity, next.Prior, 2)
	// The default conversation held only the first turn: it went with it.
	assertNotFound(t, s, first.Identity)
	convs := mustConversations(t, s, "acme", "ana")
	if len(convs) != 1 || convs[0].ID != adoptTo || convs[0].MessageCount != 2 {
		t.Fatalf("conversations %+v, want only %s with 2 messages", convs, adoptTo)
	}
	if res := mustSave(t, s, first); !res.Duplicate {
		t.Fatalf("redelivered moved exchange saved %+v, want Duplicate", res)
	}
	if msgs := mustRecent(t, s, first.Identity, 10); len(msgs) != 0 {
		t.Fatalf("default holds %q after the redelivery, want nothing", contents(msgs))
	}
}

// testAdoptAfterErasure: an erased user's recorded exchanges are gone with
// them; nothing is adopted.
func testAdoptAfterErasure(t *testing.T, s AdoptStore) {
	firstTurn(t, s, "ana")
	if err := s.DeleteUser(testCtx(t), "acme", "ana"); err != nil {
		t.Fatal(err)
	}
	next := continuation(t, "ana")
	mustAdopt(t, s, next.Identity, next.Prior, 0)
}

// testAdoptIntoDeleted: a continuation received at or before its
// conversation was deleted (in flight during the deletion, its save then
// dropped) moves nothing into it: the conversation is not brought back
// with the chat's first turns, which stay in the default conversation. A
// continuation received after the deletion adopts them, as a save then
// stores what it resends.
func testAdoptIntoDeleted(t *testing.T, s AdoptStore) {
	ctx := testCtx(t)
	first := firstTurn(t, s, "ana")
	next := continuation(t, "ana")
	// The chat's conversation existed (another chat opened the same way).
	mustSave(t, s, exchange(next.Identity, "ex-old-chat", 0, nil, []memory.Message{msg(t, "user", "Hi, I am Ana.")}, msg(t, "assistant", "Hi!")))
	inflight := time.Now()
	if err := s.DeleteConversation(ctx, next.Identity); err != nil {
		t.Fatal(err)
	}
	n, err := s.Adopt(ctx, next.Identity, "", next.Prior, inflight, 0)
	if err != nil || n != 0 {
		t.Fatalf("Adopt by a continuation received before the deletion = %d, %v; want nothing moved", n, err)
	}
	next.Received = inflight
	if res := mustSave(t, s, next); !res.Dropped {
		t.Fatalf("continuation received before the deletion saved %+v, want Dropped", res)
	}
	assertNotFound(t, s, next.Identity)
	_, dmsgs := mustConversation(t, s, first.Identity)
	assertContents(t, "default conversation", dmsgs, []string{"user:Hi, I am Ana.", "assistant:Hello Ana!"})

	if n, err := s.Adopt(ctx, next.Identity, "", next.Prior, time.Now().Add(time.Second), 0); err != nil || n != 2 {
		t.Fatalf("Adopt by a continuation received after the deletion = %d, %v; want 2 moved", n, err)
	}
}

// testContinued: when the continuation is stored before the first turn
// (its capture overtook the first turn's), Continued recognises the first
// turn as stored already; a different first turn is not.
func testContinued(t *testing.T, s AdoptStore) {
	next := continuation(t, "ana")
	mustSave(t, s, next)
	def := memory.Identity{Tenant: "acme", User: "ana", Conversation: memory.DefaultConversation}
	ex := exchange(def, "ex-first-ana", 1, nil, []memory.Message{msg(t, "user", "Hi, I am Ana.")}, msg(t, "assistant", "Hello Ana!"))
	continued := func(ex memory.Exchange) bool {
		t.Helper()
		ok, err := s.Continued(testCtx(t), ex)
		if err != nil {
			t.Fatalf("Continued: %v", err)
		}
		return ok
	}
	if continued(ex) {
		t.Fatal("Continued without a candidate = true")
	}
	ex.Candidate = adoptTo
	if !continued(ex) {
		t.Fatal("Continued = false, want the first turn found at the start of its candidate conversation")
	}
	other := ex
	other.Reply = msg(t, "assistant", "Hi there!")
	if continued(other) {
		t.Fatal("Continued = true for a first turn with another reply")
	}
	ex.Candidate = "chat-ffffffffffffffffffffffffffffffff"
	if continued(ex) {
		t.Fatal("Continued = true for an empty candidate conversation")
	}
}

// testContinuedInBranch: a continuation stored first in a branch of the
// derived conversation (which holds another chat, answered otherwise),
// recorded with it by its save (it started the branch), makes Continued
// find the first turn stored there; the branch deleted, it no longer
// does.
func testContinuedInBranch(t *testing.T, s AdoptStore) {
	derived := memory.Identity{Tenant: "acme", User: "ana", Conversation: adoptTo}
	mustSave(t, s, exchange(derived, "ex-other-chat", 1, nil, []memory.Message{msg(t, "user", "Hi, I am Ana.")}, msg(t, "assistant", "Hi!")))
	next := continuation(t, "ana")
	next.Conversation, next.Root = "chat-fedcba9876543210fedcba9876543210", adoptTo
	mustSave(t, s, next)
	def := memory.Identity{Tenant: "acme", User: "ana", Conversation: memory.DefaultConversation}
	first := exchange(def, "ex-first-ana", 1, nil, []memory.Message{msg(t, "user", "Hi, I am Ana.")}, msg(t, "assistant", "Hello Ana!"))
	first.Candidate = adoptTo
	if ok, err := s.Continued(testCtx(t), first); !ok || err != nil {
		t.Fatalf("Continued = %v, %v; want the first turn found at the start of the branch", ok, err)
	}
	if err := s.DeleteConversation(testCtx(t), next.Identity); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Continued(testCtx(t), first); ok || err != nil {
		t.Fatalf("Continued after the branch was deleted = %v, %v; want false", ok, err)
	}
}

// testAdoptLateIndex: the first turn indexed after it moved (its
// enrichment ran late) is indexed in the conversation that holds it now,
// where a guarded fact stated in it goes too; a guarded summary of the
// default conversation covering it is refused (memory.ErrErased).
func testAdoptLateIndex(t *testing.T, s AdoptStore) {
	first := firstTurn(t, s, "ana")
	next := continuation(t, "ana")
	mustAdopt(t, s, next.Identity, next.Prior, 2)
	late := item(first.Identity, "message", memory.Key(first.ID, 1), "Hello Ana!", nil)
	late.GuardSince = baseTime // as the indexer's after-save round writes it
	mustAddItems(t, s, late)
	got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "ana", Conversation: adoptTo, Text: "hello", Limit: 5})
	if len(got) != 1 || got[0].Conversation != adoptTo {
		t.Fatalf("late item = %+v, want it in %s", got, adoptTo)
	}
	f := guardedFact(first.Identity, "Lisbon", baseTime)
	f.Source = memory.Key(first.ID, 0)
	if got := mustUpsertFact(t, s, f, 0); got.Conversation != adoptTo {
		t.Fatalf("late guarded fact stated in %s = %+v, want it in %s", f.Source, got, adoptTo)
	}
	err := s.SaveSummary(testCtx(t), memory.Summary{Tenant: "acme", User: "ana", Conversation: memory.DefaultConversation,
		Version: 1, FromSeq: 1, ToSeq: 2, Text: "Ana says hello", Through: memory.Key(first.ID, 1), GuardSince: baseTime})
	if !errors.Is(err, memory.ErrErased) {
		t.Fatalf("late guarded summary of the moved turn = %v, want memory.ErrErased", err)
	}
}

// testAdoptIndexBacklog: the index backlog's entry of a moved turn moves
// with it, and one recorded late, naming the default conversation, is
// recorded where the turn lives now.
func testAdoptIndexBacklog(t *testing.T, s AdoptStore) {
	first := firstTurn(t, s, "ana")
	mustDeferIndex(t, s, pending(first, 0, 1, 10))
	next := continuation(t, "ana")
	mustAdopt(t, s, next.Identity, next.Prior, 2)
	mustDeferIndex(t, s, pending(first, 1, 2, 10)) // late: the indexer read it in default
	assertBacklog(t, "after the move", mustPendingIndex(t, s, 10, 1<<20),
		adoptTo+"/"+memory.Key(first.ID, 0)+"@1", adoptTo+"/"+memory.Key(first.ID, 1)+"@2")
}

// testAdoptMovesFactSources: a pin the first turn stated, attributed to the
// default conversation, follows the turn into the adopting conversation
// when the default conversation is left empty, so deleting that
// conversation deletes the pin; while the default conversation keeps other
// turns, both are sources, and the pin goes only once both are deleted.
func testAdoptMovesFactSources(t *testing.T, s AdoptStore) {
	for _, keepOther := range []bool{false, true} {
		user := "ana"
		if keepOther {
			user = "bea"
		}
		first := firstTurn(t, s, user)
		def := first.Identity
		if keepOther {
			mustSave(t, s, exchange(def, "ex-other-"+user, 2, nil, []memory.Message{msg(t, "user", "What time is it?")}, msg(t, "assistant", "Noon.")))
		}
		pin := fact("acme", user, memory.FactDecision, "move", "I decided to move to Lisbon with my partner Mariabelle", 1)
		pin.Conversation, pin.Pinned = memory.DefaultConversation, true
		mustUpsertFact(t, s, pin, 0)
		next := continuation(t, user)
		mustAdopt(t, s, next.Identity, next.Prior, 2)
		facts := mustFacts(t, s, "acme", user, baseTime.Add(time.Hour), true)
		want := next.Conversation
		if keepOther {
			want = memory.DefaultConversation
		}
		if len(facts) != 1 || facts[0].Conversation != want {
			t.Fatalf("%s: facts after Adopt = %+v, want the pin naming %q", user, facts, want)
		}
		if err := s.DeleteConversation(testCtx(t), next.Identity); err != nil {
			t.Fatalf("%s: DeleteConversation: %v", user, err)
		}
		left := mustFacts(t, s, "acme", user, baseTime.Add(time.Hour), true)
		if !keepOther {
			assertValues(t, user+": facts after deleting the adopting conversation", left)
			continue
		}
		assertValues(t, user+": facts after deleting the adopting conversation", left, pin.Value)
		if err := s.DeleteConversation(testCtx(t), def); err != nil {
			t.Fatalf("%s: DeleteConversation(default): %v", user, err)
		}
		assertValues(t, user+": facts after deleting both", mustFacts(t, s, "acme", user, baseTime.Add(time.Hour), true))
	}
}
