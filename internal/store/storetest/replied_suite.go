package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// RepliedStore is a store that looks a reply a client resent up by its
// print, for a request that resends only a window of its history and
// names no conversation (the record package's Router).
type RepliedStore interface {
	Store
	// Replied returns the conversations of tenant's user (the default one
	// among them), whose live messages include an assistant's message with
	// text whose print is reply (memory.Message.Print), most recently
	// updated first, at most contract.RepliedHolders of them, each with
	// its up to n live messages ending at its newest such reply, oldest
	// first. A superseded message, a deleted conversation and an erased
	// user's messages are never found.
	Replied(ctx context.Context, tenant, user string, reply memory.Print, n int) ([]memory.Replied, error)
}

// RunReplied runs the reply lookup suite. open must return a fresh, empty
// store for every call.
func RunReplied(t *testing.T, open func(t *testing.T) RepliedStore) {
	t.Helper()
	for _, tt := range []struct {
		name string
		run  func(t *testing.T, s RepliedStore)
	}{
		{"FindsTheConversationAndItsTail", testRepliedFinds},
		{"OnlyTheUsersOwn", testRepliedOwnOnly},
		{"NewestConversationFirst", testRepliedNewestFirst},
		{"NotASupersededReply", testRepliedSuperseded},
		{"NotADeletedConversation", testRepliedDeleted},
		{"NotAnErasedUser", testRepliedErased},
		{"TheDefaultConversationButNotAUserMessage", testRepliedDefault},
		{"AReplyByItsTextWithoutTheWhiteSpaceAround", testRepliedTrimmed},
		{"AReplyByItsTextWithoutItsLeadingReasoning", testRepliedWithoutReasoning},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, open(t)) })
	}
}

// fullChat stores, in id's conversation, the turns of a full-history
// client: user "<tag> question i", assistant "<tag> answer i", for i in
// 1..turns, each exchange resending all before it. It returns the
// messages as the client holds them.
func fullChat(t *testing.T, s Store, id memory.Identity, tag string, turns, at int) []memory.Message {
	t.Helper()
	var history []memory.Message
	for i := 1; i <= turns; i++ {
		q := msg(t, "user", fmt.Sprintf("%s question %d", tag, i))
		a := msg(t, "assistant", fmt.Sprintf("%s answer %d", tag, i))
		mustSave(t, s, exchange(id, fmt.Sprintf("ex-%s-%s-%d", id.User, id.Conversation, i), at+i, slices.Clone(history), []memory.Message{q}, a))
		history = append(history, q, a)
	}
	return history
}

// mustReplied looks up the print of an assistant message saying text.
func mustReplied(t *testing.T, s RepliedStore, tenant, user, text string, n int) []memory.Replied {
	t.Helper()
	got, err := s.Replied(testCtx(t), tenant, user, msg(t, "assistant", text).Print(), n)
	if err != nil {
		t.Fatalf("Replied(%s/%s, %q): %v", tenant, user, text, err)
	}
	return got
}

// convsOf returns the conversation ids of rs, in order.
func convsOf(rs []memory.Replied) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Conversation
	}
	return out
}

// testRepliedFinds: the conversation holding a reply is found with its
// live messages ending at the reply, as many as asked for, or all it
// holds up to it.
func testRepliedFinds(t *testing.T, s RepliedStore) {
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "chat-a"}
	fullChat(t, s, id, "a", 4, 0)
	got := mustReplied(t, s, "t", "u", "a answer 3", 3)
	if !slices.Equal(convsOf(got), []string{"chat-a"}) {
		t.Fatalf("Replied(a answer 3) found %v, want [chat-a]", convsOf(got))
	}
	assertContents(t, "tail of 3", got[0].Tail, []string{"assistant:a answer 2", "user:a question 3", "assistant:a answer 3"})
	if got[0].UpdatedAt.IsZero() {
		t.Errorf("Replied: UpdatedAt zero")
	}
	got = mustReplied(t, s, "t", "u", "a answer 2", 10)
	if len(got) != 1 {
		t.Fatalf("Replied(a answer 2) found %v, want [chat-a]", convsOf(got))
	}
	assertContents(t, "whole tail", got[0].Tail, []string{"user:a question 1", "assistant:a answer 1", "user:a question 2", "assistant:a answer 2"})
	if got := mustReplied(t, s, "t", "u", "never said", 3); len(got) != 0 {
		t.Errorf("Replied(never said) found %v, want none", convsOf(got))
	}
}

// testRepliedOwnOnly: the same reply stored for another user of the
// tenant, or the same user id of another tenant, is never found.
func testRepliedOwnOnly(t *testing.T, s RepliedStore) {
	fullChat(t, s, memory.Identity{Tenant: "t", User: "other", Conversation: "chat-a"}, "a", 2, 0)
	fullChat(t, s, memory.Identity{Tenant: "t2", User: "u", Conversation: "chat-a"}, "a", 2, 10)
	if got := mustReplied(t, s, "t", "u", "a answer 2", 4); len(got) != 0 {
		t.Errorf("Replied(t/u) found %v of other users, want none", convsOf(got))
	}
	if got := mustReplied(t, s, "t", "other", "a answer 2", 4); !slices.Equal(convsOf(got), []string{"chat-a"}) {
		t.Errorf("Replied(t/other) found %v, want [chat-a]", convsOf(got))
	}
}

// testRepliedNewestFirst: a reply two conversations hold (a greeting) is
// found in both, the most recently updated first.
func testRepliedNewestFirst(t *testing.T, s RepliedStore) {
	hi := msg(t, "user", "hi")
	hello := msg(t, "assistant", "Hello! How can I help you today?")
	for i, c := range []string{"chat-old", "chat-new"} {
		id := memory.Identity{Tenant: "t", User: "u", Conversation: c}
		mustSave(t, s, exchange(id, "ex-"+c, i*10, nil, []memory.Message{hi}, hello))
	}
	got := mustReplied(t, s, "t", "u", hello.Content, 2)
	if !slices.Equal(convsOf(got), []string{"chat-new", "chat-old"}) {
		t.Fatalf("Replied(greeting) found %v, want [chat-new chat-old]", convsOf(got))
	}
	// The old chat goes on: it is the newest now.
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "chat-old"}
	mustSave(t, s, exchange(id, "ex-chat-old-2", 30, []memory.Message{hi, hello}, []memory.Message{msg(t, "user", "more")}, msg(t, "assistant", "sure")))
	if got := convsOf(mustReplied(t, s, "t", "u", hello.Content, 2)); !slices.Equal(got, []string{"chat-old", "chat-new"}) {
		t.Errorf("after chat-old went on, Replied(greeting) found %v, want [chat-old chat-new]", got)
	}
}

// testRepliedSuperseded: a reply an edit superseded is not found; the
// one that replaced it is.
func testRepliedSuperseded(t *testing.T, s RepliedStore) {
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "chat-a"}
	h := fullChat(t, s, id, "a", 3, 0)
	// The client edits its second question: the branch from there on is
	// superseded.
	mustSave(t, s, exchange(id, "ex-edit", 10, slices.Clone(h[:2]), []memory.Message{msg(t, "user", "a question 2, edited")}, msg(t, "assistant", "a answer 2, edited")))
	for _, text := range []string{"a answer 2", "a answer 3"} {
		if got := mustReplied(t, s, "t", "u", text, 4); len(got) != 0 {
			t.Errorf("Replied(%q) after the edit found %v, want none", text, convsOf(got))
		}
	}
	got := mustReplied(t, s, "t", "u", "a answer 2, edited", 4)
	if len(got) != 1 {
		t.Fatalf("Replied(edited answer) found %v, want [chat-a]", convsOf(got))
	}
	assertContents(t, "tail after the edit", got[0].Tail, []string{"user:a question 1", "assistant:a answer 1", "user:a question 2, edited", "assistant:a answer 2, edited"})
}

// testRepliedDeleted: a deleted conversation's replies are never found.
func testRepliedDeleted(t *testing.T, s RepliedStore) {
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "chat-a"}
	fullChat(t, s, id, "a", 2, 0)
	fullChat(t, s, memory.Identity{Tenant: "t", User: "u", Conversation: "chat-b"}, "a", 2, 10)
	if err := s.DeleteConversation(testCtx(t), id); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	if got := convsOf(mustReplied(t, s, "t", "u", "a answer 2", 4)); !slices.Equal(got, []string{"chat-b"}) {
		t.Errorf("Replied after chat-a's deletion found %v, want [chat-b]", got)
	}
}

// testRepliedErased: an erased user's replies go with the user.
func testRepliedErased(t *testing.T, s RepliedStore) {
	fullChat(t, s, memory.Identity{Tenant: "t", User: "u", Conversation: "chat-a"}, "a", 2, 0)
	if err := s.DeleteUser(testCtx(t), "t", "u"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	if got := mustReplied(t, s, "t", "u", "a answer 1", 4); len(got) != 0 {
		t.Errorf("Replied after the erasure found %v, want none", convsOf(got))
	}
}

// testRepliedDefault: the default conversation (where a full-history
// chat's first turn is stored) is found as any other; a user's message
// saying the text of a reply is not.
func testRepliedDefault(t *testing.T, s RepliedStore) {
	def := memory.Identity{Tenant: "t", User: "u", Conversation: memory.DefaultConversation}
	mustSave(t, s, simple(t, def, 1))
	got := mustReplied(t, s, "t", "u", "answer 1", 2)
	if !slices.Equal(convsOf(got), []string{memory.DefaultConversation}) {
		t.Fatalf("Replied(answer 1) found %v, want [default]", convsOf(got))
	}
	assertContents(t, "default's tail", got[0].Tail, []string{"user:question 1", "assistant:answer 1"})
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "chat-a"}
	mustSave(t, s, exchange(id, "ex-said", 5, nil, []memory.Message{msg(t, "user", "echo")}, msg(t, "assistant", "ok")))
	if got := mustReplied(t, s, "t", "u", "echo", 2); len(got) != 0 {
		t.Errorf("Replied(echo) found the user's message in %v, want none", convsOf(got))
	}
}

// testRepliedTrimmed: a reply stored with white space around it (a model's
// reply opening or closing with line breaks) is found by its text as a
// chat app that trims it resends it, and as stored, whichever way the
// store saved it: a first turn (PostgreSQL: its save-turn function's
// digest) or a turn resending its history (the digest memgate computes).
func testRepliedTrimmed(t *testing.T, s RepliedStore) {
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "chat-w"}
	q1, a1 := msg(t, "user", "w question 1"), msg(t, "assistant", "\n\nw answer 1 \n")
	mustSave(t, s, exchange(id, "ex-w-1", 1, nil, []memory.Message{q1}, a1))
	q2, a2 := msg(t, "user", "w question 2"), msg(t, "assistant", "\tw answer 2\r\n\v\f")
	mustSave(t, s, exchange(id, "ex-w-2", 2, []memory.Message{q1, a1}, []memory.Message{q2}, a2))
	for _, text := range []string{"w answer 1", "\n\nw answer 1 \n", "w answer 2", "\tw answer 2\r\n\v\f"} {
		if got := mustReplied(t, s, "t", "u", text, 4); !slices.Equal(convsOf(got), []string{"chat-w"}) {
			t.Errorf("Replied(%q) found %v, want [chat-w]", text, convsOf(got))
		}
	}
	if got := mustReplied(t, s, "t", "u", "w answer", 4); len(got) != 0 {
		t.Errorf("Replied(a text the chat never said) found %v", convsOf(got))
	}
}

// testRepliedWithoutReasoning: a reply stored opening with a <think>
// block (a reasoning model's, as an OpenAI-compatible server relays it)
// is found by its text as a chat app that strips the block resends it,
// and as stored, whichever way the store saved it (see
// testRepliedTrimmed); a block elsewhere or never closed is part of the
// text, and a reply ending in one is found by its whole text alone.
func testRepliedWithoutReasoning(t *testing.T, s RepliedStore) {
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "chat-r"}
	q1, a1 := msg(t, "user", "r question 1"), msg(t, "assistant", "\n<think>\nweighing it\n</think>\n\n r answer 1\n")
	mustSave(t, s, exchange(id, "ex-r-1", 1, nil, []memory.Message{q1}, a1))
	q2, a2 := msg(t, "user", "r question 2"), msg(t, "assistant", "<think>hmm</think>r answer 2")
	mustSave(t, s, exchange(id, "ex-r-2", 2, []memory.Message{q1, a1}, []memory.Message{q2}, a2))
	other := memory.Identity{Tenant: "t", User: "u", Conversation: "chat-o"}
	q3, a3 := msg(t, "user", "o question"), msg(t, "assistant", "<think>never closed o answer")
	mustSave(t, s, exchange(other, "ex-o-1", 3, nil, []memory.Message{q3}, a3))
	for text, want := range map[string][]string{
		"r answer 1": {"chat-r"}, a1.Content: {"chat-r"}, "<think>other thoughts</think>r answer 1": {"chat-r"},
		"r answer 2": {"chat-r"}, a2.Content: {"chat-r"},
		a3.Content: {"chat-o"}, "never closed o answer": nil, "o answer": nil,
		"weighing it": nil, "<think>\nweighing it\n</think>": nil,
	} {
		if got := mustReplied(t, s, "t", "u", text, 4); !slices.Equal(convsOf(got), want) {
			t.Errorf("Replied(%q) found %v, want %v", text, convsOf(got), want)
		}
	}
}
