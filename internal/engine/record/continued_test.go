package record

import (
	"context"
	"errors"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// fakeReplies answers Replied with its conversations whose tails end with
// a message of that print, in its order, each cut to n messages.
type fakeReplies struct {
	convs []memory.Replied // each Tail: the conversation's live messages
	err   error
	asked []memory.Print
}

func (f *fakeReplies) Replied(_ context.Context, _, _ string, reply memory.Print, n int) ([]memory.Replied, error) {
	f.asked = append(f.asked, reply)
	if f.err != nil {
		return nil, f.err
	}
	var out []memory.Replied
	for _, c := range f.convs {
		for i := len(c.Tail) - 1; i >= 0; i-- {
			if c.Tail[i].Role == "assistant" && c.Tail[i].Print() == reply {
				out = append(out, memory.Replied{Conversation: c.Conversation, Tail: c.Tail[max(0, i+1-n) : i+1]})
				break
			}
		}
	}
	return out, nil
}

// stored returns the non-system messages of routeMsgs(texts...), as a
// conversation holds them.
func stored(texts ...string) []memory.Message { return routeMsgs(texts...)[1:] }

// TestRouterContinued states which conversation a request whose history is
// a window of a conversation's tail continues: the first (most recently
// updated) one whose live messages before and through the newest resent
// reply are the window, after at least one it no longer resends, compared
// as memgate stores them (a secret redacted); none when the user's default
// conversation holds the window (a full-history chat's first turn, which
// its continuation adopts).
func TestRouterContinued(t *testing.T) {
	a := memory.Replied{Conversation: "chat-a", Tail: stored("q1", "a1", "q2", "a2", "q3", "a3")}
	b := memory.Replied{Conversation: "chat-b", Tail: stored("p1", "Hello!", "q2 in b", "a2")}
	b2 := memory.Replied{Conversation: "chat-b", Tail: stored("p1", "Hello!", "q2", "a2")}
	secret := memory.Replied{Conversation: "chat-s", Tail: stored("q1", "a1", "my key is [redacted]", "noted")}
	greet := memory.Replied{Conversation: "chat-g", Tail: stored("hi", "Hello!")}
	midGreet := memory.Replied{Conversation: "chat-m", Tail: stored("p", "q", "hi", "Hello!")}
	firstTurn := memory.Replied{Conversation: memory.DefaultConversation, Tail: stored("hi", "Hello!")}
	otherDefault := memory.Replied{Conversation: memory.DefaultConversation, Tail: stored("other", "a2")}
	long := "A long reply, with enough said in it to tell one chat from another by."
	lone := memory.Replied{Conversation: "chat-l", Tail: stored("q1", long)}
	loneToo := memory.Replied{Conversation: "chat-l2", Tail: stored("q1 in l2", long)}
	loneStart := memory.Replied{Conversation: "chat-ls", Tail: stored("", long)[1:]}
	loneFirst := memory.Replied{Conversation: memory.DefaultConversation, Tail: stored("q1", long)}
	for _, tt := range []struct {
		name  string
		convs []memory.Replied
		texts []string // the request's, after its system prompt
		want  string
	}{
		{"a window cut at a reply", []memory.Replied{a}, []string{"a2", "q3", "a3", "q4"}, "chat-a"},
		{"a window cut at a user message", []memory.Replied{a}, []string{"q2", "a2", "q3", "a3", "q4"}, "chat-a"},
		{"an older reply of the chat", []memory.Replied{a}, []string{"q2", "a2", "q3 again"}, "chat-a"},
		{"the first that aligns of two holding the reply", []memory.Replied{b, a}, []string{"q2", "a2", "q4"}, "chat-a"},
		{"the most recent of two that align", []memory.Replied{b2, a}, []string{"q2", "a2", "q4"}, "chat-b"},
		{"a reply alone aligns with nothing", []memory.Replied{greet}, []string{"Hello!", "q2"}, ""},
		{"a long reply alone", []memory.Replied{lone}, []string{long, "q2"}, "chat-l"},
		{"a long reply alone two conversations hold", []memory.Replied{lone, loneToo}, []string{long, "q2"}, ""},
		{"a long reply alone opening its conversation", []memory.Replied{loneStart}, []string{long, "q2"}, ""},
		{"a long reply alone, a first turn's in default", []memory.Replied{loneFirst}, []string{long, "q2"}, ""},
		{"a whole history is Route's", []memory.Replied{greet}, []string{"hi", "Hello!", "q2"}, ""},
		{"a greeting said mid-chat", []memory.Replied{midGreet}, []string{"hi", "Hello!", "q2"}, "chat-m"},
		{"a full-history chat's first turn in default", []memory.Replied{firstTurn, midGreet}, []string{"hi", "Hello!", "q2"}, ""},
		{"the reply in default, after another message", []memory.Replied{otherDefault, a}, []string{"q2", "a2", "q4"}, "chat-a"},
		{"a window that does not align", []memory.Replied{a}, []string{"q2, edited", "a2", "q4"}, ""},
		{"no reply resent", []memory.Replied{a}, []string{"q4"}, ""},
		{"a secret compared redacted", []memory.Replied{secret}, []string{"my key is SECRET", "noted", "q3"}, "chat-s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msgs := routeMsgs(tt.texts...)
			if len(tt.texts)%2 == 0 {
				// routeMsgs alternates from a user message: a window opening
				// with a reply starts one later.
				msgs = append(msgs[:1], routeMsgs(append([]string{""}, tt.texts...)...)[2:]...)
			}
			f := &fakeReplies{convs: tt.convs}
			r := NewRouter(nil, f, fakeRedactor{}, nil)
			id := memory.Identity{Tenant: "t", User: "u", Conversation: "chat-derived"}
			got, err := r.Continued(context.Background(), id, memory.CutRequest(msgs, 0))
			if err != nil || got != tt.want {
				t.Errorf("Continued = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestRouterContinuedLooksUpOnlyWhatItCan: without a finder, with a cut
// history or no reply, nothing is looked up; a failed lookup is an error,
// and finds nothing.
func TestRouterContinuedLooksUpOnlyWhatItCan(t *testing.T) {
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "chat-derived"}
	msgs := routeMsgs("q1", "a1", "q2")
	if got, err := NewRouter(nil, nil, nil, nil).Continued(context.Background(), id, memory.CutRequest(msgs, 0)); got != "" || err != nil {
		t.Errorf("without a finder: %q, %v", got, err)
	}
	f := &fakeReplies{err: errors.New("store down")}
	r := NewRouter(nil, f, nil, nil)
	if got, err := r.Continued(context.Background(), id, memory.CutRequest(routeMsgs("q1"), 0)); got != "" || err != nil || len(f.asked) != 0 {
		t.Errorf("no reply resent: %q, %v, %d lookups", got, err, len(f.asked))
	}
	long := routeMsgs()
	for i := 0; i < memory.BranchHead+10; i++ {
		long = append(long, memory.Message{Role: []string{"user", "assistant"}[i%2], Content: "m"})
	}
	long = append(long, memory.Message{Role: "user", Content: "q"})
	if got, err := r.Continued(context.Background(), id, memory.CutRequest(long, 4)); got != "" || err != nil || len(f.asked) != 0 {
		t.Errorf("a cut history: %q, %v, %d lookups", got, err, len(f.asked))
	}
	if got, err := r.Continued(context.Background(), id, memory.CutRequest(msgs, 0)); got != "" || err == nil {
		t.Errorf("a failed lookup: %q, %v; want an error", got, err)
	}
}
