package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/encoder"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestWordsPastTheEncoderWindowAreRecalled: the built-in encoder reads the
// first 128 pieces of a text (about 500 bytes of English). A statement
// made at the end of a long message, past that window, sharing no word
// with the later question that needs it, still reaches the upstream
// prompt, whether the user said it or the assistant did: the message is
// indexed in runs of sentences the encoder reads whole, and the passage
// shows the part that matched.
func TestWordsPastTheEncoderWindowAreRecalled(t *testing.T) {
	filler := []string{
		"So about the office move, it took most of the day again and I keep going back and forth on it.",
		"There were a lot of small details to sort out, people kept calling, and by the evening I was tired.",
		"The boxes are still in the hallway and the movers want another date next month.",
		"My manager asked for the floor plan twice, and the printer jammed both times.",
		"Lunch was late, the coffee machine broke, and the lift was out of order all afternoon.",
		"Tomorrow I have to sort the cables, label the drawers and call the landlord about the keys.",
	}
	// advice is a reply about something else; practice, replies about
	// the same child's lessons that hold no instrument, compete with the
	// statement for the question.
	advice := []string{
		"For the home office, put the desk next to the window so you get daylight without glare on the screen.",
		"A second monitor at eye level saves your neck, and a cheap arm frees up most of the desk.",
		"Keep the cables in a tray under the desk, it makes cleaning much easier and looks tidier on calls.",
		"Noise from the street is easier to live with when there is a rug and a bookshelf on the hard walls.",
		"Plan a fixed time to stop working, otherwise the room quietly turns into the place where evenings go.",
		"Plants and a lamp with warm light make the corner feel less like an office and more like home.",
	}
	practice := []string{
		"Short practice every day works better for children than one long session at the weekend.",
		"Ask the teacher for a simple weekly plan so practice at home follows what was done in class.",
		"Recording a short video once a month shows progress that is hard to notice from day to day.",
		"Small rewards after a good week help, but let the music itself become the reason over time.",
	}
	m, err := encoder.Default()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// said are the exchanges: what the user says and what the
		// upstream answers; the first holds the statement at its end.
		said                      [][2]string
		statement, question, word string
	}{
		{
			name:      "said by the user",
			statement: "My daughter just started learning the violin at school.",
			said: [][2]string{
				{strings.Join(filler, " ") + " My daughter just started learning the violin at school.", "Noted."},
				{strings.Join(filler[:3], " "), "Noted."},
				{strings.Join(filler[3:], " "), "Noted."},
			},
			question: "What instrument does my kid play?",
			word:     "violin",
		},
		{
			name:      "said by the assistant",
			statement: "For her first instrument I would pick the cello, since the school lends them for free.",
			said: [][2]string{
				{"I am setting up my home office, any advice?", strings.Join(advice, " ") + " For her first instrument I would pick the cello, since the school lends them for free."},
				{"And for the lighting?", "A desk lamp with a warm bulb on the side of your free hand, so it casts no shadow where you write."},
				{"How do I keep my daughter practising?", practice[0]},
				{"What should I ask her teacher?", practice[1]},
				{"How do I see if she is improving?", practice[2]},
				{"Should I reward her?", practice[3]},
			},
			question: "What did you tell me my kid should play?",
			word:     "cello",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			long := tt.said[0][0]
			if len(tt.said[0][1]) > len(long) {
				long = tt.said[0][1]
			}
			before := strings.TrimSuffix(long, " "+tt.statement)
			if n := len(m.Tokenizer().Encode(before)); n < encoder.MaxTokens {
				t.Fatalf("the statement starts at piece %d: it must start past the encoder's window (%d)", n, encoder.MaxTokens)
			}
			var replies []http.Handler
			for _, ex := range tt.said {
				replies = append(replies, upstreamtest.Chat(upstreamtest.Reply{Content: ex[1]}))
			}
			up := upstreamtest.New(t, upstreamtest.Sequence(append(replies, upstreamtest.Chat(upstreamtest.Reply{Content: "Sure."}))...))
			url := servePatient(t, up)
			for i, ex := range tt.said {
				if r := chat(t, url, headers("", "lena", "week"), false, user(ex[0])); r.Status != http.StatusOK {
					t.Fatalf("chat %d: %d %s", i, r.Status, r.Body)
				}
			}
			eventually(t, "every exchange enriched", func() bool {
				n, err := strconv.Atoi(metricValue(t, url, "memgate_enrich_exchanges_total"))
				return err == nil && n >= len(tt.said)
			})
			var prompt string
			eventually(t, "the statement past the window to be recalled", func() bool {
				r := chat(t, url, headers("", "lena", "question", "X-Memory-Mode", "read", "X-Memory-Budget", "1200"), false, user(tt.question))
				if r.Status != http.StatusOK {
					t.Fatalf("chat: %d %s", r.Status, r.Body)
				}
				prompt = lastChatPrompt(t, up)
				return strings.Contains(prompt, tt.word)
			})
			// The passage shows the part that matched, not the start of the message.
			if !strings.Contains(prompt, tt.statement) {
				t.Fatalf("the prompt holds the word but not the statement:\n%s", prompt)
			}
		})
	}
}
