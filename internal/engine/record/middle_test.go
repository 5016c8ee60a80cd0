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
// no change, wherever they are. Both stores.
func TestCaptureSeesEditInUnstoredMiddle(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, secrets := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/secrets=%v", backend, secrets), func(t *testing.T) { testEditInUnstoredMiddle(t, backend, secrets) })
		}
	}
}

// middleStore is what the test needs of a store.
type middleStore interface {
	storeCaps
	Saver
	Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error)
}

func testEditInUnstoredMiddle(t *testing.T, backend string, secrets bool) {
	const keep, start, grown = 100, 350, 410
	var red Redactor
	if secrets {
		red = fakeRedactor{}
	}
	for _, tt := range []struct {
		name   string
		change func(h []memory.Message) []memory.Message
		at     int  // the first position changed; -1: none
		fork   bool // the messages after it changed too (moved)
	}{
		{"unchanged", func(h []memory.Message) []memory.Message { return h }, -1, false},
		{"edited", func(h []memory.Message) []memory.Message {
			h = slices.Clone(h)
			h[280].Content = "message 280, as the user rewrote it"
			return h
		}, 280, false},
		{"deleted", func(h []memory.Message) []memory.Message {
			return slices.Delete(slices.Clone(h), 290, 291)
		}, 290, true},
		{"edited with a secret", func(h []memory.Message) []memory.Message {
			h = slices.Clone(h)
			h[280].Content = "message 280, now with a password SECRET"
			return h
		}, 280, false},
	} {
		if tt.name == "edited with a secret" && !secrets {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			store, queue := openMiddle(t, backend)
			c := mustCapturer(t, queue, store, red, withStore(Options{}, store))
			id := memory.Identity{Tenant: "t1", User: fmt.Sprint("u-middle-", time.Now().UnixNano()), Conversation: "c-long"}
			ch := &longChat{t: t, c: c, id: id, keep: keep, secret: func(i int) bool {
				return secrets && (i == 100 || i == 265 || i == 270 || i == 300)
			}}
			grow, send := ch.grow, ch.send
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
			if got, want := live(), contentsOf(ch.history); !slices.Equal(got, want) {
				t.Fatalf("before the change the conversation holds %d messages, want the %d of the history", len(got), len(want))
			}
			ch.history = tt.change(ch.history)
			ex := send(3)
			if ex.Skipped == 0 {
				t.Fatal("the third turn's history was not cut: the test does not reach the unstored middle")
			}
			window := ch.history[len(ch.history)-2-keep : len(ch.history)-2] // what the third turn's cut kept
			if tt.at >= 0 && tt.at >= memory.BranchHead+ex.Skipped {
				t.Fatalf("the change at %d is inside the window, not the unstored middle", tt.at)
			}
			want := contentsOf(ch.history)
			switch {
			case tt.fork:
				want = append(contentsOf(ch.history[:tt.at]), contentsOf(window)...)
				want = append(want, "question 3", "answer 3")
			case tt.at >= 0:
				// An edit: the old text goes, the new one takes its place
				// (redacted as any stored message), every other message
				// stays.
			}
			got := live()
			if !slices.Equal(got, want) {
				t.Fatalf("after the third turn the conversation holds %d messages (%s), want %d (%s)", len(got), around(got, tt.at), len(want), around(want, tt.at))
			}
			if !tt.fork {
				// The same request again finds the conversation as its
				// client has it: nothing to edit, nothing to rewind.
				if again := ch.c.checkResent(context.Background(), withResent(ex, ch.lastMsgs, ch.lastCut)); len(again.Edits) > 0 || again.Rewind != nil || again.Gap == nil {
					t.Fatalf("the same request checked again finds %d edits (rewind %v, gap %v), want none", len(again.Edits), again.Rewind != nil, again.Gap != nil)
				}
			}
			// The next turn finds the conversation as the client has it:
			// it stores its own two messages, and supersedes nothing.
			send(4)
			if got, want := live(), append(want, "question 4", "answer 4"); !slices.Equal(got, want) {
				t.Fatalf("after the fourth turn the conversation holds %d messages, want %d", len(got), len(want))
			}
			// Every stamp is the digest of the history as memgate stores
			// it: text it redacted (here the edited message's, never
			// stored) never reaches a digest at rest, where a database
			// reader could confirm a guess of it.
			checkStampsAsStored(t, store, id, ch.history)
			rewinds := 0.0
			if tt.fork {
				rewinds = 1
			}
			if got := value(t, c.metrics.rewinds); got != rewinds {
				t.Fatalf("counted %v rewinds, want %v", got, rewinds)
			}
		})
	}
}

// openMiddle opens a store of backend for the tests of long chats, with
// its capture queue (none on PostgreSQL).
func openMiddle(t *testing.T, backend string) (middleStore, Queue) {
	t.Helper()
	if backend == "sqlite" {
		s := mustSQLite(t)
		return s, s.Outbox()
	}
	return mustPostgres(t), nil
}

// checkStampsAsStored checks that every message of id stored at its
// position in history carries the digest of history through it as
// memgate stores it (the test redactor's placeholder for SECRET), with
// the Amends of id's messages up to it: text it redacted never reaches a
// digest at rest, where a database reader could confirm a guess of it,
// nor an Amend (an edit's). At least one message must be stamped.
func checkStampsAsStored(t *testing.T, store middleStore, id memory.Identity, history []memory.Message) {
	t.Helper()
	stored := slices.Clone(history)
	for i := range stored {
		stored[i].Content = strings.ReplaceAll(stored[i].Content, "SECRET", "[redacted]")
	}
	digests := memory.Digests(stored, len(stored))
	amends, err := store.(StampReader).StampAmends(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	stamped := 0
	for p := range digests {
		r, err := store.(StampReader).StampAt(context.Background(), id, p)
		if err != nil || r.Pos != p {
			continue
		}
		stamped++
		for _, a := range amends {
			if a.Pos <= p {
				r.Digest = r.Digest.Xor(a.Delta)
			}
		}
		if r.Digest != digests[p] {
			t.Fatalf("the message stored at %d is stamped with a digest of the history as the client sent it, not as stored", p)
		}
	}
	if stamped == 0 {
		t.Fatal("no message stored with a stamp")
	}
}

// around shows msgs near at (the start when at < 0), for a failure.
func around(msgs []string, at int) string {
	at = max(at, 2)
	return fmt.Sprintf("%q", msgs[max(0, at-2):min(len(msgs), at+3)])
}

// longChat is a full-history client's long chat, as the tests of its cut
// requests grow and send it through c.
type longChat struct {
	t       *testing.T
	c       *Capturer
	id      memory.Identity
	keep    int              // the newest messages a request's cut keeps
	secret  func(i int) bool // whether the client's message i holds SECRET; nil: none
	history []memory.Message // the client's history, without its system prompt
	// lastMsgs and lastCut are the last request's messages and its cut.
	lastMsgs []memory.Message
	lastCut  memory.Cut
}

// grow adds the client's messages up to n, "message i", alternating user
// and assistant.
func (ch *longChat) grow(n int) {
	for i := len(ch.history); i < n; i++ {
		text := fmt.Sprint("message ", i)
		if ch.secret != nil && ch.secret(i) {
			text += " SECRET"
		}
		ch.history = append(ch.history, memory.Message{Role: []string{"user", "assistant"}[i%2], Content: text})
	}
}

// send captures the chat's turn n, its history cut (keep), and adds the
// question and its answer to the history.
func (ch *longChat) send(n int) memory.Exchange {
	ch.t.Helper()
	question := memory.Message{Role: "user", Content: fmt.Sprint("question ", n)}
	msgs := append([]memory.Message{{Role: "system", Content: "You are helpful."}}, ch.history...)
	msgs = append(msgs, question)
	cut := memory.CutRequest(msgs, ch.keep)
	ex := memory.Exchange{ID: fmt.Sprint("req-", n), Identity: ch.id, Model: "m", Prior: cut.Prior, Turn: cut.Turn,
		Skipped: cut.Skipped, Reply: memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", n)}}
	ch.c.Capture(context.Background(), withResent(ex, msgs, cut))
	ch.history = append(ch.history, question, ex.Reply)
	ch.lastMsgs, ch.lastCut = msgs, cut
	return ex
}

// withResent returns ex with the request's whole history, as the proxy
// hands it to the Capturer.
func withResent(ex memory.Exchange, msgs []memory.Message, cut memory.Cut) memory.Exchange {
	if cut.Skipped > 0 {
		ex.Resent = memory.Resent{Msgs: msgs}
	}
	return ex
}

// BenchmarkCheckResent: the check a request of a long full-history chat
// costs the Capturer when nothing in the part its cut leaves out changed
// and its previous turn is stored (the common case; the same request
// checked again would find the message before its window unstored, and
// digest its gap as stored): the digests of its history before the
// window (60,000 messages of about 300 bytes, cut at the default 2,000)
// and one read of a SQLite store holding the chat.
func BenchmarkCheckResent(b *testing.B) {
	const keep, long = 2000, 60000
	store := mustSQLite(b)
	c := mustCapturer(b, store.Outbox(), store, nil, withStore(Options{}, store))
	id := memory.Identity{Tenant: "t1", User: "u1", Conversation: "c-long"}
	msgs := make([]memory.Message, long+1)
	for i := range msgs {
		msgs[i] = memory.Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprintf("%0300d", i)}
	}
	cut := memory.CutRequest(msgs, keep)
	ex := withResent(memory.Exchange{ID: "req-1", Identity: id, Model: "m", Prior: cut.Prior, Turn: cut.Turn, Skipped: cut.Skipped,
		Reply: memory.Message{Role: "assistant", Content: "answer"}}, msgs, cut)
	c.Capture(context.Background(), ex) // the conversation holds the cut history, stamped
	// The chat's next request: the message before its window is stored.
	msgs = append(msgs, ex.Reply, memory.Message{Role: "user", Content: "next"})
	cut = memory.CutRequest(msgs, keep)
	next := withResent(memory.Exchange{ID: "req-2", Identity: id, Model: "m", Prior: cut.Prior, Turn: cut.Turn, Skipped: cut.Skipped,
		Reply: memory.Message{Role: "assistant", Content: "answer"}}, msgs, cut)
	b.ResetTimer()
	for b.Loop() {
		if got := c.checkResent(context.Background(), next); got.Gap == nil || got.Rewind != nil {
			b.Fatal("the check found the unchanged history changed, or could not tell")
		}
	}
}

// BenchmarkCaptureLongHistory captures turn after turn of a full-history
// chat of 60,000 messages of about 300 bytes (18 MB of text) on SQLite,
// cut at the default 2,000: with the check of what the cut leaves out
// (check=on, Options.Stamps) and without it (check=off, the capture as it
// was before the check, but for the stamps the save computes).
func BenchmarkCaptureLongHistory(b *testing.B) {
	const keep, long = 2000, 60000
	for _, check := range []bool{false, true} {
		b.Run(fmt.Sprint("check=", map[bool]string{false: "off", true: "on"}[check]), func(b *testing.B) {
			store := mustSQLite(b)
			opts := withStore(Options{}, store)
			if !check {
				opts.Stamps = nil
			}
			c := mustCapturer(b, store.Outbox(), store, nil, opts)
			id := memory.Identity{Tenant: "t1", User: "u1", Conversation: "c-long"}
			msgs := make([]memory.Message, long, long+2*(b.N+10)+1)
			for i := range msgs {
				msgs[i] = memory.Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprintf("%0300d", i)}
			}
			n := 0
			turn := func() {
				n++
				q := memory.Message{Role: "user", Content: fmt.Sprint("question ", n)}
				req := append(msgs, q)
				cut := memory.CutRequest(req, keep)
				ex := withResent(memory.Exchange{ID: fmt.Sprint("req-", n), Identity: id, Model: "m", Prior: cut.Prior, Turn: cut.Turn,
					Skipped: cut.Skipped, Reply: memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", n)}}, req, cut)
				c.Capture(context.Background(), ex)
				msgs = append(msgs, q, ex.Reply)
			}
			turn() // the chat's first turn here stores its cut history
			b.ResetTimer()
			for b.Loop() {
				turn()
			}
		})
	}
}
