package prompt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/engine/prompt"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/tokens"
)

// countedStore is a SQLite store counting the reads of conversations'
// first messages (MessagesAfter: what the cache's heads read through).
type countedStore struct {
	*sqlite.Store
	after int
}

func (c *countedStore) MessagesAfter(ctx context.Context, id memory.Identity, afterSeq int64, limit int) ([]memory.Message, error) {
	c.after++
	return c.Store.MessagesAfter(ctx, id, afterSeq, limit)
}

// countedHeads counts the checks that asked the cache for a head.
type countedHeads struct {
	*cache.Reads
	calls int
}

func (c *countedHeads) HeadHeld(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Held, error) {
	c.calls++
	return c.Reads.HeadHeld(ctx, rev, id, n)
}

// editChatter drives full-history chats of one user through an Assembler
// over the cache, saving each exchange through it as capture does.
type editChatter struct {
	t       *testing.T
	st      *countedStore
	heads   *countedHeads
	asm     *prompt.Assembler
	history map[string][]memory.Message // by conversation
	n       int
}

// say sends conv's history with q as its new turn; it returns the prompt's
// text and the store reads of first messages its assembly made.
func (c *editChatter) say(conv, q string) (string, int) {
	c.t.Helper()
	ctx := context.Background()
	id := memory.Identity{Tenant: "default", User: "u", Conversation: conv}
	turn := mustUserMsg(c.t, q)
	before := c.st.after
	p, err := c.asm.Prepare(ctx, memory.Request{Identity: id, Mode: memory.ModeOn, Model: "gpt-4o-mini",
		Messages: append(append([]memory.Message(nil), c.history[conv]...), turn)})
	if err != nil {
		c.t.Fatal(err)
	}
	reads := c.st.after - before
	var text strings.Builder
	for _, m := range p.Messages {
		text.Write(m)
	}
	c.n++
	reply, err := memory.ParseMessage(mustRaw(c.t, "assistant", "ack: "+q))
	if err != nil {
		c.t.Fatal(err)
	}
	ex := memory.Exchange{ID: fmt.Sprintf("ex%03d", c.n), Identity: id, Model: "gpt-4o-mini", At: time.Now(),
		Prior: c.history[conv], Turn: []memory.Message{turn}, Reply: reply}
	if _, err := c.heads.SaveExchange(ctx, ex); err != nil {
		c.t.Fatal(err)
	}
	c.history[conv] = append(append(c.history[conv], turn), reply)
	return text.String(), reads
}

// TestEditCheckReadsTheHeadFromTheCache: the check of a full-history
// request's history for edits (which leaves out of the prompt what an
// edit takes back) costs a request that carries no edit no store read
// while its memory holds nothing of the conversation an edit could take
// back, and, once it does (a pin its second message stated), one read
// when the chat's head is first asked for: the chat's own saves extend
// the head the cache holds, so each later request finds it there. A save
// of another of the user's chats moves the user's revisions, and the
// next request of this one reads its head again. The request carrying an
// edit of the pinned message is shown the pin nowhere.
func TestEditCheckReadsTheHeadFromTheCache(t *testing.T) {
	ctx := context.Background()
	sq, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memgate.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	counter, err := tokens.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	st := &countedStore{Store: sq}
	reads := cache.NewReads(st, nil, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)
	heads := &countedHeads{Reads: reads}
	asm, err := prompt.NewAssembler(prompt.Deps{History: reads, Facts: reads, Heads: heads, Revisions: sq, Counter: counter},
		prompt.Options{RecentMessages: 20, MaxContextTokens: 8000, CompletionReserve: 1024,
			Shares: prompt.Shares{Pinned: 0.1, Facts: 0.15}, FactsMax: 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &editChatter{t: t, st: st, heads: heads, asm: asm, history: map[string][]memory.Message{}}

	// No fact of the chat yet: nothing to check, nothing read.
	for _, q := range []string{"Hello!", "My phone number is 555-0100 and I like green tea."} {
		if _, n := c.say("c", q); n != 0 {
			t.Fatalf("%q: %d store reads of the head with nothing to leave out, want 0", q, n)
		}
	}
	if heads.calls != 0 {
		t.Fatalf("the head was asked for %d times with nothing to leave out", heads.calls)
	}
	// The pin the second message stated, as enrichment writes it.
	source := c.history["c"][2]
	msgs, err := sq.Recent(ctx, memory.Identity{Tenant: "default", User: "u", Conversation: "c"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Content == source.Content {
			source = m
		}
	}
	if source.Key == "" {
		t.Fatal("the second message is not stored")
	}
	if _, err := sq.UpsertFact(ctx, memory.Fact{Tenant: "default", User: "u", Type: memory.FactPreference, Key: "taste: green tea",
		Value: "My phone number is 555-0100 and I like green tea.", Pinned: true, Confidence: 0.6, Mentions: 1,
		Conversation: "c", Source: source.Key}, 100); err != nil {
		t.Fatal(err)
	}

	// The chat goes on, resending its history unchanged.
	const turns = 20
	total, calls := 0, heads.calls
	for i := range turns {
		p, n := c.say("c", fmt.Sprintf("Tell me about tea number %d.", i))
		if !strings.Contains(p, "- My phone number is 555-0100") {
			t.Fatalf("resent unchanged, the history is not shown its pin:\n%s", p)
		}
		if i > 0 && n != 0 {
			t.Fatalf("request %d, no edit: %d store reads of the head, want 0 (the cache holds it)", i, n)
		}
		total += n
	}
	asked := heads.calls - calls
	t.Logf("one chat, %d requests with no edit: head asked for %d times, read from the store %d times (hit rate %.0f%%)",
		turns, asked, total, 100*float64(asked-total)/float64(asked))
	if total > 1 {
		t.Fatalf("%d store reads of the head over %d requests with no edit, want at most the first", total, turns)
	}

	// Two chats of the user, in turn: each save moves the user's revisions.
	total, calls = 0, heads.calls
	for i := range turns / 2 {
		_, n := c.say("c", fmt.Sprintf("And coffee number %d?", i))
		total += n
		_, n = c.say("d", fmt.Sprintf("Other chat, turn %d.", i))
		total += n
	}
	asked = heads.calls - calls
	t.Logf("two chats in turn, %d requests with no edit: head asked for %d times, read from the store %d times (hit rate %.0f%%)",
		turns, asked, total, 100*float64(asked-total)/max(1, float64(asked)))

	// The edit: the pinned message says something else.
	edited := c.history["c"]
	edited[2] = mustUserMsg(t, "I like black coffee.")
	reply, err := memory.ParseMessage(mustRaw(t, "assistant", "ack: I like black coffee."))
	if err != nil {
		t.Fatal(err)
	}
	edited[3] = reply
	p, n := c.say("c", "What is my phone number?")
	if strings.Contains(p, "555-0100") {
		t.Fatalf("the request carrying the edit is shown the old number:\n%s", p)
	}
	if n > 1 {
		t.Fatalf("the edit: %d store reads of the head, want at most one", n)
	}
	t.Logf("the edit: %d store reads of the head", n)
}

// BenchmarkEditCheck is the cost of the edit check to a full-history
// request of a chat of 200 stored messages whose memory holds a pin the
// chat stated (so the check runs), with the chat's head in the cache, as
// a chat that goes on finds it: Prepare with the check (check=true) and
// without it (no Heads). storereads/op counts the store reads of the head.
func BenchmarkEditCheck(b *testing.B) {
	ctx := context.Background()
	sq, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "memgate.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sq.Close() })
	counter, err := tokens.New(nil)
	if err != nil {
		b.Fatal(err)
	}
	st := &countedStore{Store: sq}
	reads := cache.NewReads(st, nil, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)
	id := memory.Identity{Tenant: "default", User: "u", Conversation: "c"}
	msg := func(role, content string) memory.Message {
		m, err := memory.ParseMessage([]byte(fmt.Sprintf(`{"role":%q,"content":%q}`, role, content)))
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	var history []memory.Message
	for i := range 100 {
		turn := msg("user", fmt.Sprintf("Question %d about tea, coffee and the weather in Lisbon.", i))
		if i == 1 {
			turn = msg("user", "My phone number is 555-0100 and I like green tea.")
		}
		reply := msg("assistant", fmt.Sprintf("Answer %d: a reply of a few words about tea and coffee.", i))
		ex := memory.Exchange{ID: fmt.Sprintf("ex%03d", i), Identity: id, Model: "gpt-4o-mini", At: time.Now(),
			Prior: history, Turn: []memory.Message{turn}, Reply: reply}
		if _, err := reads.SaveExchange(ctx, ex); err != nil {
			b.Fatal(err)
		}
		history = append(history, turn, reply)
	}
	stored, err := sq.Recent(ctx, id, 4)
	if err != nil {
		b.Fatal(err)
	}
	head, err := sq.MessagesAfter(ctx, id, 0, 3)
	if err != nil || len(stored) == 0 {
		b.Fatal(err)
	}
	if _, err := sq.UpsertFact(ctx, memory.Fact{Tenant: "default", User: "u", Type: memory.FactPreference, Key: "taste: green tea",
		Value: "My phone number is 555-0100 and I like green tea.", Pinned: true, Confidence: 0.6, Mentions: 1,
		Conversation: "c", Source: head[2].Key}, 100); err != nil {
		b.Fatal(err)
	}
	req := memory.Request{Identity: id, Mode: memory.ModeOn, Model: "gpt-4o-mini",
		Messages: append(append([]memory.Message(nil), history...), msg("user", "And what about cocoa?"))}
	for _, check := range []bool{false, true} {
		b.Run(fmt.Sprintf("check=%v", check), func(b *testing.B) {
			deps := prompt.Deps{History: reads, Facts: reads, Revisions: sq, Counter: counter}
			if check {
				deps.Heads = reads
			}
			asm, err := prompt.NewAssembler(deps, prompt.Options{RecentMessages: 20, MaxContextTokens: 16000, CompletionReserve: 1024,
				Shares: prompt.Shares{Pinned: 0.1, Facts: 0.15}, FactsMax: 20}, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := asm.Prepare(ctx, req); err != nil { // warms the caches
				b.Fatal(err)
			}
			before := st.after
			b.ResetTimer()
			for b.Loop() {
				if _, err := asm.Prepare(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(st.after-before)/float64(b.N), "storereads/op")
		})
	}
}
