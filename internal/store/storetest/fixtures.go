package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// suiteTimeout bounds every store call the suites make, so a hung backend
// fails the test instead of stalling the run.
const suiteTimeout = 30 * time.Second

// baseTime is the capture time of the suites' first exchange; later
// exchanges are spaced a second apart after it.
var baseTime = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// testCtx returns a context bounded by suiteTimeout and cancelled when the
// test ends.
func testCtx(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	tb.Cleanup(cancel)
	return ctx
}

// rawMsg builds the verbatim OpenAI message for role and content and parses
// it the way the proxy does, so Content is what ParseMessage derives.
func rawMsg(tb testing.TB, raw string) memory.Message {
	tb.Helper()
	m, err := memory.ParseMessage(json.RawMessage(raw))
	if err != nil {
		tb.Fatalf("parse fixture %s: %v", raw, err)
	}
	m.Tokens = len(m.Content)/4 + 1
	return m
}

// msg builds a plain text message.
func msg(tb testing.TB, role, content string) memory.Message {
	tb.Helper()
	b, err := json.Marshal(map[string]string{"role": role, "content": content})
	if err != nil {
		tb.Fatalf("marshal fixture: %v", err)
	}
	return rawMsg(tb, string(b))
}

// exchange builds an exchange for id with the given history, turn and reply,
// captured at baseTime plus n seconds.
func exchange(id memory.Identity, exID string, n int, prior, turn []memory.Message, reply memory.Message) memory.Exchange {
	return memory.Exchange{
		ID:       exID,
		Identity: id,
		Model:    "gpt-4o-mini",
		Prior:    prior,
		Turn:     turn,
		Reply:    reply,
		At:       baseTime.Add(time.Duration(n) * time.Second),
	}
}

// simple builds the n-th exchange of a conversation whose client sends only
// its newest message: user "question n", assistant "answer n".
func simple(tb testing.TB, id memory.Identity, n int) memory.Exchange {
	tb.Helper()
	return exchange(id, fmt.Sprintf("ex-%s-%s-%d", id.User, id.Conversation, n), n, nil,
		[]memory.Message{msg(tb, "user", fmt.Sprintf("question %d", n))},
		msg(tb, "assistant", fmt.Sprintf("answer %d", n)))
}

// mustSave stores ex and fails the test on error.
func mustSave(tb testing.TB, s Store, ex memory.Exchange) memory.SaveResult {
	tb.Helper()
	res, err := s.SaveExchange(testCtx(tb), ex)
	if err != nil {
		tb.Fatalf("SaveExchange(%s): %v", ex.ID, err)
	}
	checkStored(tb, s, ex.Identity, res)
	return res
}

// checkStored checks a save's Stored messages are the ones it inserted, as
// Recent reads them back: the newest live messages of the conversation.
// Call it before anything else writes to the conversation.
func checkStored(tb testing.TB, s Store, id memory.Identity, res memory.SaveResult) {
	tb.Helper()
	if len(res.Stored) != res.Inserted {
		tb.Fatalf("save of %+v: %d messages Stored, %d Inserted", id, len(res.Stored), res.Inserted)
	}
	if res.Inserted == 0 {
		return
	}
	recent, err := s.Recent(testCtx(tb), id, res.Inserted)
	if err != nil {
		tb.Fatalf("Recent(%+v): %v", id, err)
	}
	if !reflect.DeepEqual(res.Stored, recent) {
		tb.Fatalf("save of %+v: Stored\n%+v\nbut Recent reads\n%+v", id, res.Stored, recent)
	}
}

// saveCounts is what a SaveResult reports besides the messages it stored.
type saveCounts struct {
	inserted, superseded int
	duplicate, dropped   bool
}

// counts returns r's counts, to compare results.
func counts(r memory.SaveResult) saveCounts {
	return saveCounts{inserted: r.Inserted, superseded: r.Superseded, duplicate: r.Duplicate, dropped: r.Dropped}
}

// mustConversation loads a conversation that must exist.
func mustConversation(tb testing.TB, s Store, id memory.Identity) (memory.Conversation, []memory.Message) {
	tb.Helper()
	c, msgs, err := s.Conversation(testCtx(tb), id)
	if err != nil {
		tb.Fatalf("Conversation(%+v): %v", id, err)
	}
	return c, msgs
}

// mustConversations lists a user's conversations.
func mustConversations(tb testing.TB, s Store, tenant, user string) []memory.Conversation {
	tb.Helper()
	cs, err := s.Conversations(testCtx(tb), tenant, user)
	if err != nil {
		tb.Fatalf("Conversations(%s, %s): %v", tenant, user, err)
	}
	return cs
}

// mustRecent loads the newest n live messages.
func mustRecent(tb testing.TB, s Store, id memory.Identity, n int) []memory.Message {
	tb.Helper()
	msgs, err := s.Recent(testCtx(tb), id, n)
	if err != nil {
		tb.Fatalf("Recent(%+v, %d): %v", id, n, err)
	}
	return msgs
}

// assertNotFound checks that the conversation is gone.
func assertNotFound(tb testing.TB, s Store, id memory.Identity) {
	tb.Helper()
	_, msgs, err := s.Conversation(testCtx(tb), id)
	if !errors.Is(err, memory.ErrNotFound) {
		tb.Fatalf("Conversation(%+v) = %d messages, err %v; want memory.ErrNotFound", id, len(msgs), err)
	}
}

// contents projects messages to "role:content" strings for comparison.
func contents(msgs []memory.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role + ":" + m.Content
	}
	return out
}

// assertContents compares messages by role and content, in order.
func assertContents(tb testing.TB, what string, got []memory.Message, want []string) {
	tb.Helper()
	g := contents(got)
	if len(g) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(g, want) {
		tb.Fatalf("%s:\n got %q\nwant %q", what, g, want)
	}
}

// assertLiveOrder checks that messages carry the conversation's identity and
// strictly increasing Seq, and that the conversation's count matches.
func assertLiveOrder(tb testing.TB, id memory.Identity, c memory.Conversation, msgs []memory.Message) {
	tb.Helper()
	if c.Tenant != id.Tenant || c.User != id.User || c.ID != id.Conversation {
		tb.Fatalf("conversation identity = %s/%s/%s, want %s/%s/%s", c.Tenant, c.User, c.ID, id.Tenant, id.User, id.Conversation)
	}
	if c.MessageCount != len(msgs) {
		tb.Fatalf("MessageCount = %d, want %d live messages", c.MessageCount, len(msgs))
	}
	var prev int64
	for i, m := range msgs {
		if m.Tenant != id.Tenant || m.User != id.User || m.Conversation != id.Conversation {
			tb.Fatalf("message %d identity = %s/%s/%s, want %+v", i, m.Tenant, m.User, m.Conversation, id)
		}
		if m.Seq <= prev {
			tb.Fatalf("message %d Seq = %d after %d; want strictly increasing", i, m.Seq, prev)
		}
		prev = m.Seq
	}
}

// jsonEqual reports whether two JSON documents decode to equal values.
func jsonEqual(tb testing.TB, a, b []byte) bool {
	tb.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		tb.Fatalf("decode %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		tb.Fatalf("decode %s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
