package prompt

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestTurnsTheWindowDropsAreRecalled covers a turn the recent turns'
// window leaves out for want of room (behind a message larger than the
// window, or simply old in a long chat, before compaction summarises it):
// it is not in the prompt, so recall may show it. The recall filter leaves
// out only what the prompt shows; taking every turn the window was offered
// as shown sent such a question upstream with no memory at all (live: a
// ~200 KB message after "My favourite colour is teal." left the next
// question without the statement until compaction ran).
func TestTurnsTheWindowDropsAreRecalled(t *testing.T) {
	day := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	const (
		statement = "My favourite colour is teal."
		noted     = "Noted, teal it is."
		question  = "What is my favourite colour and what did the weather tool say?"
	)
	large := "Here is a long document. " + strings.Repeat("lorem ipsum dolor sit amet consectetur adipiscing elit ", 1200)
	items := []memory.Item{passageOf("c", "k1", day,
		memory.PassageTurn{Key: "k1", Role: "user", Text: statement, Hit: true},
		memory.PassageTurn{Key: "k2", Role: "assistant", Text: noted})}
	quoted := func(role, text string) string {
		raw, err := json.Marshal(map[string]string{"role": role, "content": text})
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	// turns returns the chat before the question: the statement, its
	// reply, then what follows it.
	turns := func(after ...string) []string {
		out := []string{quoted("user", statement), quoted("assistant", noted)}
		for i, text := range after {
			out = append(out, quoted([]string{"user", "assistant"}[i%2], text))
		}
		return out
	}
	var longChat []string
	for i := range 40 {
		longChat = append(longChat, fmt.Sprintf("Turn %d of a long chat about the garden, the weather and the roses, %s", i, strings.Repeat("with more words to say ", 12)))
	}
	for _, tt := range []struct {
		name  string
		chat  []string
		whole bool // the client resends the chat; else it is stored
	}{
		{"newest only, behind a large message", turns(large, "OK, noted."), false},
		{"full history, behind a large message", turns(large, "OK, noted."), true},
		{"newest only, a long chat", turns(longChat...), false},
		{"full history, a long chat", turns(longChat...), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stored []memory.Message
			msgs := []string{quoted("user", question)}
			if tt.whole {
				msgs = append(append([]string{}, tt.chat...), msgs...)
			} else {
				for i, raw := range tt.chat {
					m, err := memory.ParseMessage(json.RawMessage(raw))
					if err != nil {
						t.Fatal(err)
					}
					m.Seq, m.Key = int64(i+1), fmt.Sprintf("k%d", i+1)
					stored = append(stored, m)
				}
			}
			a, err := NewAssembler(Deps{History: &fakeMemory{stored: stored}, Recaller: fakeRecaller{memory.Recalled{Items: items}}, Counter: mustCounter(t)},
				Options{RecentMessages: 100, MaxContextTokens: 8000, CompletionReserve: 1024,
					Shares: Shares{Summary: 0.25, Pinned: 0.1, Facts: 0.1, Recall: 0.3}, Now: func() time.Time { return day }}, nil)
			if err != nil {
				t.Fatal(err)
			}
			req := request(t, memory.ModeOn, msgs...)
			req.Model, req.Budget = "gpt-4o-mini", 4000
			p, err := a.Prepare(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			recalled := ""
			for _, b := range p.Blocks {
				if !b.Stable {
					recalled += b.Text
				}
			}
			sent := ""
			for _, m := range p.Messages {
				sent += string(m)
			}
			if strings.Count(sent, statement) != strings.Count(recalled, statement) {
				t.Fatalf("the window sends the statement itself: the case does not test a dropped turn")
			}
			if !strings.Contains(recalled, statement) {
				t.Fatalf("the statement the window dropped is not recalled either (parts %v); recalled block:\n%s", p.Parts, recalled)
			}
		})
	}
}
