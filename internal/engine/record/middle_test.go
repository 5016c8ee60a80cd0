package record

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestCaptureSeesEditInUnstoredMiddle: a full-history client whose chat
// grew past what one request stores (memory.BranchHead first messages and
// keep newest: longer histories are cut, memory.CutRequest) edits or
// deletes a message in the part of its history its requests no longer
// store — a message memgate stored when it was among the newest. The
// request's cut holds neither the old nor the new text, so only a check of
// the whole resent history against what is stored can see the change. The
// stored copy then leaves the live branch, with every message after it,
// as an edit inside the window supersedes; the conversation goes on with
// the window the client resent and its new turn, once each, in order. A
// chat that changed nothing keeps every message it stored. Messages
// stored redacted (the client sends a secret memgate does not keep) are
// no change, wherever they are.
func TestCaptureSeesEditInUnstoredMiddle(t *testing.T) {
	for _, secrets := range []bool{false, true} {
		t.Run(fmt.Sprint("secrets=", secrets), func(t *testing.T) { testEditInUnstoredMiddle(t, secrets) })
	}
}

func testEditInUnstoredMiddle(t *testing.T, secrets bool) {
	const keep, start, grown = 100, 350, 410
	var red Redactor
	if secrets {
		red = fakeRedactor{}
	}
	for _, tt := range []struct {
		name   string
		change func(h []memory.Message) []memory.Message
		at     int // the first position changed; -1: none
	}{
		{"unchanged", func(h []memory.Message) []memory.Message { return h }, -1},
		{"edited", func(h []memory.Message) []memory.Message {
			h = slices.Clone(h)
			h[280].Content = "message 280, as the user rewrote it"
			return h
		}, 280},
		{"deleted", func(h []memory.Message) []memory.Message {
			return slices.Delete(slices.Clone(h), 290, 291)
		}, 290},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := mustSQLite(t)
			c := mustCapturer(t, store.Outbox(), store, red, withStore(Options{}, store))
			id := memory.Identity{Tenant: "t1", User: "u1", Conversation: "c-long"}
			var history []memory.Message
			grow := func(n int) {
				for i := len(history); i < n; i++ {
					role := "user"
					if i%2 == 1 {
						role = "assistant"
					}
					text := fmt.Sprint("message ", i)
					if secrets && (i == 100 || i == 265 || i == 270 || i == 300) {
						text += " SECRET"
					}
					history = append(history, memory.Message{Role: role, Content: text})
				}
			}
			send := func(n int) memory.Exchange {
				t.Helper()
				question := memory.Message{Role: "user", Content: fmt.Sprint("question ", n)}
				msgs := append([]memory.Message{{Role: "system", Content: "You are helpful."}}, history...)
				msgs = append(msgs, question)
				cut := memory.CutRequest(msgs, keep)
				ex := memory.Exchange{ID: fmt.Sprint("req-", n), Identity: id, Model: "m", Prior: cut.Prior, Turn: cut.Turn,
					Skipped: cut.Skipped, Reply: memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", n)}}
				ex = withResent(ex, msgs, cut)
				c.Capture(context.Background(), ex)
				history = append(history, question, ex.Reply)
				return ex
			}
			live := func() []string {
				t.Helper()
				msgs, err := store.Recent(context.Background(), id, 10*grown)
				if err != nil {
					t.Fatal(err)
				}
				return contentsOf(msgs)
			}
			contentsOf := func(msgs []memory.Message) []string {
				out := contentsOf(msgs)
				for i := range out {
					out[i] = strings.ReplaceAll(out[i], "SECRET", "[redacted]")
				}
				return out
			}
			grow(start)
			send(1) // stored whole: positions 256..351 are stored
			grow(grown)
			send(2) // cut: positions 256..309 are left out, stored before
			if got, want := live(), contentsOf(history); !slices.Equal(got, want) {
				t.Fatalf("before the change the conversation holds %d messages, want the %d of the history", len(got), len(want))
			}
			history = tt.change(history)
			ex := send(3)
			if ex.Skipped == 0 {
				t.Fatal("the third turn's history was not cut: the test does not reach the unstored middle")
			}
			window := history[len(history)-2-keep : len(history)-2] // what the third turn's cut kept
			if tt.at >= 0 && tt.at >= memory.BranchHead+ex.Skipped {
				t.Fatalf("the change at %d is inside the window, not the unstored middle", tt.at)
			}
			want := contentsOf(history)
			if tt.at >= 0 {
				want = append(contentsOf(history[:tt.at]), contentsOf(window)...)
				want = append(want, "question 3", "answer 3")
			}
			got := live()
			if !slices.Equal(got, want) {
				t.Fatalf("after the third turn the conversation holds %d messages (%s), want %d (%s)", len(got), around(got, tt.at), len(want), around(want, tt.at))
			}
			// The next turn finds the conversation as the client has it:
			// it stores its own two messages, and supersedes nothing.
			send(4)
			if got, want := live(), append(want, "question 4", "answer 4"); !slices.Equal(got, want) {
				t.Fatalf("after the fourth turn the conversation holds %d messages, want %d", len(got), len(want))
			}
			rewinds := 0.0
			if tt.at >= 0 {
				rewinds = 1
			}
			if got := value(t, c.metrics.rewinds); got != rewinds {
				t.Fatalf("counted %v rewinds, want %v", got, rewinds)
			}
		})
	}
}

// around shows msgs near at (the start when at < 0), for a failure.
func around(msgs []string, at int) string {
	at = max(at, 2)
	return fmt.Sprintf("%q", msgs[max(0, at-2):min(len(msgs), at+3)])
}

// withResent returns ex with the request's whole history, as the proxy
// hands it to the Capturer.
func withResent(ex memory.Exchange, msgs []memory.Message, cut memory.Cut) memory.Exchange {
	ex.Resent = memory.Resent{Msgs: msgs, Digests: cut.Digests}
	return ex
}
