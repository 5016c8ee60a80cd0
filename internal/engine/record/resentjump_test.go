package record

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestCaptureGapPastLastStampIsDigestedAsStored: a full-history chat's
// history grew by more than its requests stored in between (turns sent
// with memory off, failed, or dropped), so the newest stamped message the
// check finds lies before the window, not just before it. Its digest
// meets the client's, yet the client's messages after it, up to the
// window, were never compared with anything stored: the gap's digest
// must sum them as memgate stores them, redacted, so no digest at rest
// sums a secret the redactor keeps out of the store. Both stores.
func TestCaptureGapPastLastStampIsDigestedAsStored(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			const keep, start, jumped = 100, 350, 600
			var store middleStore
			var queue Queue
			switch backend {
			case "sqlite":
				s := mustSQLite(t)
				store, queue = s, s.Outbox()
			default:
				store = mustPostgres(t)
			}
			c := mustCapturer(t, queue, store, fakeRedactor{}, withStore(Options{}, store))
			id := memory.Identity{Tenant: "t1", User: fmt.Sprint("u-jump-", time.Now().UnixNano()), Conversation: "c-long"}
			var history []memory.Message
			grow := func(n int) {
				for i := len(history); i < n; i++ {
					text := fmt.Sprint("message ", i)
					if i == 450 { // never stored: in the part the jump skips
						text += " SECRET"
					}
					history = append(history, memory.Message{Role: []string{"user", "assistant"}[i%2], Content: text})
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
				c.Capture(context.Background(), withResent(ex, msgs, cut))
				history = append(history, question, ex.Reply)
				return ex
			}
			grow(start)
			send(1) // stored whole, stamped through 351
			grow(jumped)
			ex := send(2)
			if w := memory.BranchHead + ex.Skipped; w-1 <= start+1 {
				t.Fatalf("the window starts at %d: the test does not jump past the last stamp", w)
			}
			stored := slices.Clone(history)
			for i := range stored {
				stored[i].Content = strings.ReplaceAll(stored[i].Content, "SECRET", "[redacted]")
			}
			digests := memory.Digests(stored, len(stored))
			stamped := 0
			for p := start + 2; p < len(digests); p++ {
				r, err := store.(StampReader).StampAt(context.Background(), id, p)
				if err != nil || r.Pos != p {
					continue
				}
				stamped++
				if r.Digest != digests[p] {
					t.Fatalf("the message stored at %d is stamped with a digest summing the client's unredacted text", p)
				}
			}
			if stamped == 0 {
				t.Fatal("the second turn stored nothing stamped")
			}
		})
	}
}
