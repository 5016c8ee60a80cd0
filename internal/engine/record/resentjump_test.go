package record

import (
	"context"
	"fmt"
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
// sums a secret the redactor keeps out of the store. The chat's next
// turns then meet those stamps (the client's unredacted text in the
// unstamped gap corrected as stored) and are stamped in turn, as after a
// chat's first request that was cut with a secret in its gap. Both
// stores.
func TestCaptureGapPastLastStampIsDigestedAsStored(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, tt := range []struct {
			name          string
			start, jumped int
		}{
			{"grown past the last stamp", 350, 600},
			{"first request cut", 600, 610},
		} {
			t.Run(backend+"/"+tt.name, func(t *testing.T) { testGapPastLastStamp(t, backend, tt.start, tt.jumped) })
		}
	}
}

// testGapPastLastStamp stores a chat's turn at start messages, another at
// jumped, with a secret at 450, and a third.
func testGapPastLastStamp(t *testing.T, backend string, start, jumped int) {
	const keep, secretAt = 100, 450
	store, queue := openMiddle(t, backend)
	c := mustCapturer(t, queue, store, fakeRedactor{}, withStore(Options{}, store))
	id := memory.Identity{Tenant: "t1", User: fmt.Sprint("u-jump-", time.Now().UnixNano()), Conversation: "c-long"}
	ch := &longChat{t: t, c: c, id: id, keep: keep, secret: func(i int) bool { return i == secretAt }}
	grow, send := ch.grow, ch.send
	grow(start)
	send(1)
	grow(jumped)
	if ex := send(2); memory.BranchHead+ex.Skipped <= secretAt {
		t.Fatalf("the window starts at %d: the secret is not in the part left out", memory.BranchHead+ex.Skipped)
	}
	checkStampsAsStored(t, store, id, ch.history)
	// The next turn's check meets the stamps the second stored: its own
	// messages are stamped too.
	send(3)
	last := len(ch.history) - 1
	if r, err := store.(StampReader).StampAt(context.Background(), id, last); err != nil || r.Pos != last {
		t.Fatalf("the third turn's reply at %d is not stamped (newest stamp at %d, %v): its check could not meet the stored stamps", last, r.Pos, err)
	}
}
