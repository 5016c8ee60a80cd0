package storetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// testGuard: an exchange carrying a BranchSeed (a derived conversation's
// turn) is refused, Parted and storing nothing, when the conversation's
// first live messages part from the history it resends (memory.Parts) —
// read from the conversation's start even when it holds far more than
// the history, and seeing the exchanges planned before it in a group
// commit — and stored as before when its history goes on, regenerates or
// resends a reply otherwise; without a seed, a parting history
// supersedes as an edit.
func testGuard(t *testing.T, open func(t *testing.T) CaptureStore) {
	const seed = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	m := func(role, text string) memory.Message { return msg(t, role, text) }
	conv := memory.Identity{Tenant: "t1", User: "alice", Conversation: "chat-derived"}
	chatA := []memory.Message{m("user", "hi"), m("assistant", "Hello!"), m("user", "plan a trip"), m("assistant", "Where to?")}
	guarded := func(id string, n int, prior []memory.Message, turn string) memory.Exchange {
		ex := exchange(conv, id, n, prior, []memory.Message{m("user", turn)}, m("assistant", "re: "+turn))
		ex.Derived, ex.BranchSeed = true, seed
		return ex
	}
	// holdingA is a store whose conversation holds chat A's four messages.
	holdingA := func(t *testing.T) CaptureStore {
		s := open(t)
		mustSave(t, s, exchange(conv, "a1", 0, chatA[:2], []memory.Message{chatA[2]}, chatA[3]))
		return s
	}
	live := func(t *testing.T, s CaptureStore) string {
		t.Helper()
		return strings.Join(contents(mustRecent(t, s, conv, 1000)), " ")
	}
	heldA := strings.Join(contents(chatA), " ")

	tests := []struct {
		name   string
		ex     memory.Exchange
		parted bool
		want   string // the conversation's live messages after
	}{
		{"another chat opening alike", guarded("b", 1, chatA[:2], "write a letter"), true, heldA},
		{"another chat answered otherwise", guarded("b", 1, []memory.Message{chatA[0], m("assistant", "Hey.")}, "write a letter"), true, heldA},
		{"going on", guarded("a2", 1, chatA, "Peru"), false, heldA + " user:Peru assistant:re: Peru"},
		{"regenerating", guarded("a1b", 1, chatA[:2], "plan a trip"), false, "user:hi assistant:Hello! user:plan a trip assistant:re: plan a trip"},
		// The client's version of the reply supersedes the stored one.
		{"a reply resent otherwise", guarded("a2", 1, []memory.Message{chatA[0], m("assistant", "Hello there!"), chatA[2], chatA[3]}, "Peru"), false,
			"user:hi assistant:Hello there! user:plan a trip assistant:Where to? user:Peru assistant:re: Peru"},
		// A reply resent with other white space around it (a chat app
		// trims a model's line breaks) is the reply stored: kept as it is.
		{"a reply resent with other white space around it", guarded("a2", 1, []memory.Message{chatA[0], m("assistant", "\nHello! "), chatA[2], chatA[3]}, "Peru"), false,
			heldA + " user:Peru assistant:re: Peru"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := holdingA(t)
			res, err := s.SaveExchange(testCtx(t), tt.ex)
			if err != nil {
				t.Fatal(err)
			}
			if res.Parted != tt.parted || tt.parted && (res.Inserted != 0 || res.Superseded != 0) {
				t.Fatalf("saved %+v, want Parted %v", res, tt.parted)
			}
			if got := live(t, s); got != tt.want {
				t.Fatalf("conversation holds %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("without a seed another chat supersedes, as an edit", func(t *testing.T) {
		s := holdingA(t)
		ex := guarded("b", 1, chatA[:2], "write a letter")
		ex.BranchSeed = ""
		if res := mustSave(t, s, ex); res.Parted || res.Superseded != 2 {
			t.Fatalf("saved %+v, want 2 superseded", res)
		}
	})
	t.Run("a conversation far longer than the history", func(t *testing.T) {
		s := open(t)
		held := []memory.Message{chatA[0], chatA[1]}
		for i := range 60 {
			held = append(held, m("user", fmt.Sprint("q", i)), m("assistant", fmt.Sprint("a", i)))
		}
		mustSave(t, s, exchange(conv, "long", 0, held[:len(held)-2], held[len(held)-2:len(held)-1], held[len(held)-1]))
		res, err := s.SaveExchange(testCtx(t), guarded("b", 1, held[:2], "write a letter"))
		if err != nil || !res.Parted {
			t.Fatalf("another chat saved %+v, %v; want Parted", res, err)
		}
		// Going back to the first question and asking it again is the
		// same chat: not Parted (how it aligns, so far behind the
		// conversation's end, is the save's business).
		res, err = s.SaveExchange(testCtx(t), guarded("again", 2, held[:2], "q0"))
		if err != nil || res.Parted || res.Inserted == 0 {
			t.Fatalf("asking the first question again saved %+v, %v; want it stored", res, err)
		}
	})
	t.Run("in one group commit, the second chat parts from the first", func(t *testing.T) {
		s := open(t)
		first := []memory.Message{m("user", "hi"), m("assistant", "Hello!")}
		a := guarded("a", 1, first, "plan a trip")
		b := guarded("b", 2, []memory.Message{first[0], m("assistant", "Hey.")}, "write a letter")
		res, err := s.SaveExchanges(testCtx(t), []memory.Exchange{a, b, guarded("a2", 3, append(append([]memory.Message(nil), first...), m("user", "plan a trip"), m("assistant", "re: plan a trip")), "Peru")})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Parted || res[0].Inserted != 4 || !res[1].Parted || res[1].Inserted != 0 || res[2].Parted || res[2].Inserted != 2 {
			t.Fatalf("results %+v, want the first and third stored, the second Parted", res)
		}
		if got, want := live(t, s), "user:hi assistant:Hello! user:plan a trip assistant:re: plan a trip user:Peru assistant:re: Peru"; got != want {
			t.Fatalf("conversation holds %q, want %q", got, want)
		}
	})
}
