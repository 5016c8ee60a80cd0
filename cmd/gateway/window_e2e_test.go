package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/encoder"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestWordsPastTheEncoderWindowAreRecalled: the built-in encoder reads the
// first 128 pieces of a text (about 500 bytes of English). A statement
// made at the end of a long message, past that window, sharing no word
// with the later question that needs it, still reaches the upstream
// prompt: the message is indexed in runs of sentences the encoder reads
// whole, and the passage shows the part that matched.
func TestWordsPastTheEncoderWindowAreRecalled(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: "Noted."}))
	url := servePatient(t, up)
	filler := []string{
		"So about the office move, it took most of the day again and I keep going back and forth on it.",
		"There were a lot of small details to sort out, people kept calling, and by the evening I was tired.",
		"The boxes are still in the hallway and the movers want another date next month.",
		"My manager asked for the floor plan twice, and the printer jammed both times.",
		"Lunch was late, the coffee machine broke, and the lift was out of order all afternoon.",
		"Tomorrow I have to sort the cables, label the drawers and call the landlord about the keys.",
	}
	fact := "My daughter just started learning the violin at school."
	long := strings.Join(filler, " ") + " " + fact
	m, err := encoder.Default()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m.Tokenizer().Encode(strings.Join(filler, " "))); n < encoder.MaxTokens {
		t.Fatalf("the statement starts at piece %d: it must start past the encoder's window (%d)", n, encoder.MaxTokens)
	}
	for i, msg := range []string{long, strings.Join(filler[:3], " "), strings.Join(filler[3:], " ")} {
		if r := chat(t, url, headers("", "lena", "week"), false, user(msg)); r.Status != http.StatusOK {
			t.Fatalf("chat %d: %d %s", i, r.Status, r.Body)
		}
	}
	question := "What instrument does my kid play?"
	var prompt string
	eventually(t, "the statement past the window to be recalled", func() bool {
		r := chat(t, url, headers("", "lena", "question", "X-Memory-Mode", "read", "X-Memory-Budget", "1200"), false, user(question))
		if r.Status != http.StatusOK {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
		prompt = lastChatPrompt(t, up)
		return strings.Contains(prompt, "violin")
	})
	// The passage shows the part that matched, not the start of the message.
	if !strings.Contains(prompt, fact) {
		t.Fatalf("the prompt holds the word but not the statement:\n%s", prompt)
	}
}
