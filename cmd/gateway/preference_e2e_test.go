package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// chatter is a long user message about something else, different for each i.
func chatter(i int) string {
	topics := []string{"the office move", "my sister's wedding plans", "the new laptop", "a podcast about history",
		"the neighbour's renovation", "a football match", "the train strike", "a book club pick", "tax paperwork",
		"the garden", "a friend's birthday", "the car's service"}
	t := topics[i%len(topics)]
	return fmt.Sprintf("So, about %s: it took most of the day again and I keep going back and forth on it. "+
		"There were a lot of small details to sort out, people kept calling, and by the evening I was tired. "+
		"Can you help me think through what to do next about %s, step by step?", t, t)
}

// TestPreferenceStatedInPassingComesBack: a preference and a constraint
// said in passing deep inside a long earlier session, among many other
// standing statements (more pins than the pinned share holds), come back
// in a new conversation many turns later when a request touches them —
// through the real gateway (SQLite, compaction and recall as `serve`
// wires them, no side-model key), into the upstream prompt.
func TestPreferenceStatedInPassingComesBack(t *testing.T) {
	reply := strings.Repeat("That sounds like a lot to handle, and it makes sense to take it one piece at a time. ", 8)
	up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: reply}))
	url := servePatient(t, up)
	others := []string{
		"I prefer window seats on long flights.", "I want to learn Spanish this year.",
		"I decided to cancel my streaming subscription.", "I prefer dark roast coffee in the morning.",
		"My goal is to run a half marathon in October.", "I prefer paper books to ebooks.",
		"I want to save R$ 5.000 by June for a trip to Japan.", "I decided to switch to a standing desk.",
		"I prefer short answers with bullet points.", "I want to visit my grandmother every month.",
		"I prefer trains to planes for short trips.", "I decided to stop drinking soda.",
		"I prefer working from the library on Mondays.", "I want to repaint the living room in blue.",
	}
	inPassing := map[int]string{
		6:  "Anyway, by the way, I'm allergic to shellfish, so keep that in mind.",
		15: "Also I only have weekends free these days, the new job eats my weekdays.",
	}
	h := headers("", "ana", "life")
	turns := 0
	for i := range 40 {
		msg := chatter(i)
		if i%3 == 1 && i/3 < len(others) {
			msg = others[i/3] + " " + msg
		}
		if s, ok := inPassing[i]; ok {
			msg = chatter(i+100) + " " + s + " " + chatter(i+200)
		}
		if i == 20 {
			h = headers("", "ana", "work") // a second long session
		}
		if r := chat(t, url, h, false, user(msg)); r.Status != http.StatusOK {
			t.Fatalf("chat %d: %d %s", i, r.Status, r.Body)
		}
		turns++
	}
	facts := func() []memory.Fact {
		var out struct{ Data []memory.Fact }
		if code := apiCall(t, http.MethodGet, url+"/v1/memory/users/ana/facts", nil, nil, &out); code != http.StatusOK {
			t.Fatalf("GET facts: %d", code)
		}
		return out.Data
	}
	eventually(t, "the statements to be kept", func() bool {
		n := 0
		for _, f := range facts() {
			if strings.Contains(f.Value, "shellfish") || strings.Contains(f.Value, "weekends free") {
				n++
			}
		}
		return n == 2
	})
	pinned := 0
	for _, f := range facts() {
		if f.Pinned {
			pinned++
		}
	}
	t.Logf("%d turns, %d pinned facts", turns, pinned)

	tests := []struct {
		conv, question, want string
	}{
		{"dinner", "Any ideas for a seafood dinner on Friday? Maybe paella or a shrimp platter.", "allergic to shellfish"},
		{"pottery", "Should I book the weekday evening pottery class or the Saturday one?", "weekends free"},
	}
	for _, tt := range tests {
		t.Run(tt.conv, func(t *testing.T) {
			r := chat(t, url, headers("", "ana", tt.conv, "X-Memory-Budget", "1200"), false, user(tt.question))
			if r.Status != http.StatusOK {
				t.Fatalf("chat: %d %s", r.Status, r.Body)
			}
			if prompt := lastChatPrompt(t, up); !strings.Contains(prompt, tt.want) {
				t.Fatalf("%q is not in the prompt of %q:\n%s", tt.want, tt.question, prompt)
			}
		})
	}
}

// servePatient serves the gateway as `serve` does (SQLite in a temp dir,
// default settings) in front of up, with generous load deadlines: a test
// that asserts what reaches the prompt, not how fast, must not have a
// busy machine leave recall out. It returns the gateway's URL.
func servePatient(t *testing.T, up *upstreamtest.Server) string {
	t.Helper()
	return serveConfigured(t, "memory:\n  load_timeout: 30s\n  embedding_timeout: 20s\n",
		map[string]string{"GATEWAY_UPSTREAM_BASE_URL": up.URL()})
}
