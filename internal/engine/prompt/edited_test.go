package prompt

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// fakeHeads serves a conversation's first live messages, counting reads.
type fakeHeads struct {
	live  []memory.Message
	reads int
}

func (f *fakeHeads) HeadHeld(_ context.Context, _ *memory.Revisions, _ memory.Identity, n int) ([]memory.Held, error) {
	f.reads++
	out := make([]memory.Held, 0, n)
	for _, m := range f.live[:min(n, len(f.live))] {
		out = append(out, m.Held())
	}
	return out, nil
}

// editChat is a stored chat of n messages, user and assistant in turn,
// their seqs from 1 with a gap (a superseded reply) after seq 3.
func editChat(n int) []memory.Message {
	out := make([]memory.Message, n)
	seq := int64(0)
	for i := range out {
		seq++
		if seq == 4 {
			seq++ // the gap a superseded reply leaves
		}
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		out[i] = memory.Message{Role: role, Content: fmt.Sprintf("message %d", i), Seq: seq}
	}
	return out
}

// TestEditsSummary: the judgement a save makes of a resent history,
// against the messages a summary covers (through the seq of stored[5]).
func TestEditsSummary(t *testing.T) {
	stored := editChat(12)
	stored[2] = memory.Message{Role: "tool", Content: "the full tool output", Seq: stored[2].Seq}
	stored[4].Content = "my key is [REDACTED]"
	toSeq := stored[5].Seq
	// form stores "my key is sk-1" redacted.
	form := func(m memory.Message) memory.Message {
		m.Content = strings.ReplaceAll(m.Content, "sk-1", "[REDACTED]")
		return m
	}
	client := func(edit func([]memory.Message) []memory.Message) []memory.Message {
		c := make([]memory.Message, len(stored))
		for i, m := range stored {
			c[i] = memory.Message{Role: m.Role, Content: m.Content}
		}
		c[4].Content = "my key is sk-1" // as the client sent it
		return edit(c)
	}
	same := func(c []memory.Message) []memory.Message { return c }
	for _, tc := range []struct {
		name   string
		client []memory.Message
		want   bool
	}{
		{"the history as stored", client(same), false},
		{"the history and a new turn", client(func(c []memory.Message) []memory.Message {
			return append(c, memory.Message{Role: "user", Content: "new"}, memory.Message{Role: "assistant", Content: "re: new"})
		}), false},
		{"a covered user message edited", client(func(c []memory.Message) []memory.Message { c[4].Content = "edited"; return c }), true},
		{"the first message edited", client(func(c []memory.Message) []memory.Message { c[0].Content = "edited"; return c }), true},
		{"the first two messages edited", client(func(c []memory.Message) []memory.Message {
			c[0].Content, c[1].Content = "edited", "edited too"
			return c
		}), false},
		{"a covered reply edited", client(func(c []memory.Message) []memory.Message { c[3].Content = "edited"; return c }), true},
		{"the last covered message edited", client(func(c []memory.Message) []memory.Message { c[5].Content = "edited"; return c }), true},
		{"a covered message dropped", client(func(c []memory.Message) []memory.Message { return slices.Delete(c, 1, 2) }), true},
		{"a message inserted among the covered", client(func(c []memory.Message) []memory.Message {
			return slices.Insert(c, 2, memory.Message{Role: "user", Content: "inserted"})
		}), true},
		{"rewound to a covered message", client(func(c []memory.Message) []memory.Message { return c[:3] }), true},
		{"a message after the summary edited", client(func(c []memory.Message) []memory.Message { c[6].Content = "edited"; return c }), false},
		{"a message after the summary dropped", client(func(c []memory.Message) []memory.Message { return slices.Delete(c, 7, 9) }), false},
		{"rewound past the summary", client(func(c []memory.Message) []memory.Message { return c[:7] }), false},
		{"a covered tool result trimmed", client(func(c []memory.Message) []memory.Message { c[2].Content = "[trimmed]"; return c }), false},
		{"a window from a covered message on", client(func(c []memory.Message) []memory.Message { return c[3:] }), false},
		{"a window after the summary", client(func(c []memory.Message) []memory.Message { return c[8:] }), false},
		{"a window with a covered message edited", client(func(c []memory.Message) []memory.Message { c[4].Content = "edited"; return c[2:] }), true},
		{"another chat", []memory.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}}, false},
		{"another chat opening with the same reply", []memory.Message{{Role: "user", Content: "hey"}, {Role: stored[1].Role, Content: stored[1].Content}}, false},
		{"the first message edited, only its reply resent", client(func(c []memory.Message) []memory.Message { c[0].Content = "edited"; return c[:2] }), false},
		{"the first message edited, the rest resent but a message", client(func(c []memory.Message) []memory.Message {
			c[0].Content, c[9].Content = "edited", "edited too"
			return c
		}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := make([]memory.Held, len(stored))
			for i, m := range stored {
				held[i] = m.Held()
			}
			if got := editsSummary(held, toSeq, tc.client, form); got != tc.want {
				t.Fatalf("editsSummary = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("a message stored redacted, compared as sent", func(t *testing.T) {
		held := make([]memory.Held, len(stored))
		for i, m := range stored {
			held[i] = m.Held()
		}
		if !editsSummary(held, toSeq, client(same), nil) {
			t.Fatal("without the stored form, the redacted message is not told from an edit")
		}
	})
}

// TestPrepareLeavesOutTheSummaryAnEditChanges: a full-history client
// whose resent history edits a message the summary covers gets no
// summary (nor its share: the turns take it), one that resends it
// unchanged gets it, and a client sending only its newest turn is not
// checked.
func TestPrepareLeavesOutTheSummaryAnEditChanges(t *testing.T) {
	stored := editChat(6)
	heads := &fakeHeads{live: stored}
	mem := &fakeMemory{stored: stored, summary: &memory.Summary{Version: 1, FromSeq: 1, ToSeq: stored[3].Seq,
		Text: "SUMMARY OF THE OLD TEXT", Summariser: memory.SummariserModel}}
	a, err := NewAssembler(Deps{History: mem, Summaries: mem, Heads: heads, Counter: byteCounter{}},
		Options{RecentMessages: 8, MaxContextTokens: 700, Shares: Shares{Summary: 0.2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resend := func(history []memory.Message) []memory.Message {
		out := make([]memory.Message, len(history))
		for i, m := range history {
			out[i] = memory.Message{Role: m.Role, Content: m.Content + strings.Repeat(" padding", 10)}
		}
		return out
	}
	// The stored messages are what the client sent.
	padded := resend(stored)
	for i := range padded {
		padded[i].Seq = stored[i].Seq
	}
	heads.live, mem.stored = padded, padded
	edited := slices.Clone(stored)
	edited[0].Content = "edited"
	for _, tc := range []struct {
		name        string
		req         memory.Request
		wantSummary bool
	}{
		{"resent unchanged", request(t, memory.ModeOn, rawTurns(padded, "next?")...), true},
		{"resent edited", request(t, memory.ModeOn, rawTurns(resend(edited), "next?")...), false},
		{"newest turn only", request(t, memory.ModeOn, rawTurns(nil, "next?")...), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Prepare(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(joined(p), "SUMMARY OF THE OLD TEXT"); got != tc.wantSummary {
				t.Fatalf("summary shown: %v, want %v:\n%s", got, tc.wantSummary, joined(p))
			}
			if len(p.Degraded) > 0 {
				t.Fatalf("degraded %v: an edit is no failure", p.Degraded)
			}
		})
	}
}

// TestUnsaid: the stored messages whose text a resent history takes off
// the live branch, as its save does (their facts go with them).
func TestUnsaid(t *testing.T) {
	stored := editChat(8)
	stored[2] = memory.Message{Role: "tool", Content: "the full tool output", Seq: stored[2].Seq}
	held := make([]memory.Held, len(stored))
	for i := range stored {
		stored[i].Key = fmt.Sprintf("x:%d", i)
		held[i] = stored[i].Held()
	}
	client := func(edit func([]memory.Message) []memory.Message) []memory.Message {
		c := make([]memory.Message, len(stored))
		for i, m := range stored {
			c[i] = memory.Message{Role: m.Role, Content: m.Content}
		}
		return edit(c)
	}
	keys := func(is ...int) []string {
		var out []string
		for _, i := range is {
			out = append(out, stored[i].Key)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		client []memory.Message
		want   []string
	}{
		{"the history as stored", client(func(c []memory.Message) []memory.Message { return c }), nil},
		{"the history and a new turn", client(func(c []memory.Message) []memory.Message {
			return append(c, memory.Message{Role: "user", Content: "new"})
		}), nil},
		{"a user message edited", client(func(c []memory.Message) []memory.Message { c[4].Content = "edited"; return c }), keys(4)},
		{"a message and its reply edited", client(func(c []memory.Message) []memory.Message {
			c[4].Content, c[5].Content = "edited", "edited too"
			return c
		}), keys(4, 5)},
		{"the first message edited, the rest resent", client(func(c []memory.Message) []memory.Message { c[0].Content = "edited"; return c }), keys(0)},
		{"a tool result trimmed", client(func(c []memory.Message) []memory.Message { c[2].Content = "[trimmed]"; return c }), nil},
		{"rewound", client(func(c []memory.Message) []memory.Message { return c[:6] }), keys(6, 7)},
		{"a message dropped: the rest is no longer where it was", client(func(c []memory.Message) []memory.Message { return slices.Delete(c, 5, 6) }), keys(5, 6, 7)},
		{"a window with a message edited", client(func(c []memory.Message) []memory.Message { c[4].Content = "edited"; return c[3:] }), keys(4)},
		{"another chat", []memory.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for k := range unsaid(held, tc.client, nil) {
				got = append(got, k)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("unsaid = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPrepareLeavesOutWhatAnEditUnsays: the request that edits a message
// the summary covers is assembled before its save retracts what the old
// text alone stated; its prompt leaves out the pinned and recalled facts
// whose source is that message (unless stated again), and the recalled
// passages showing it or the conversation's summary, and keeps the rest.
// A request resending the history unchanged is shown all of it.
func TestPrepareLeavesOutWhatAnEditUnsays(t *testing.T) {
	stored := editChat(6)
	for i := range stored {
		stored[i].Content += strings.Repeat(" padding", 10)
		stored[i].Key = fmt.Sprintf("x:%d", i)
	}
	stored[2].Content = "my phone is 555-0100" + strings.Repeat(" padding", 10)
	heads := &fakeHeads{live: stored}
	pin := func(key, value, source string, mentions int) memory.Fact {
		return memory.Fact{Type: memory.FactPreference, Key: key, Value: value, Pinned: true, Confidence: 1,
			Mentions: mentions, Conversation: "c", Source: source}
	}
	facts := []memory.Fact{
		pin("phone", "555-0100", "x:2", 1),                // only the edited text stated it
		pin("tea", "likes green tea 555-0101", "x:2", 2),  // stated again elsewhere
		pin("city", "lives in Lisbon 555-0102", "x:0", 1), // an unedited message's
		{Type: memory.FactPreference, Key: "pager", Value: "pager 555-0103", Confidence: 1, Mentions: 1,
			Conversation: "other", Source: "x:2"}, // another conversation's message of that key
	}
	mem := &fakeMemory{stored: stored, facts: facts, summary: &memory.Summary{Version: 1, FromSeq: 1, ToSeq: stored[3].Seq,
		Text: "SUMMARY OF THE OLD TEXT", Summariser: memory.SummariserModel}}
	rec := recallFunc(func(context.Context, memory.RecallQuery) (memory.Recalled, error) {
		return memory.Recalled{Facts: facts, Items: []memory.Item{
			{Conversation: "c", Kind: "message", Ref: "x:2", Text: "PASSAGE OF THE OLD TEXT"},
			{Conversation: "c", Kind: "message", Ref: "x:1", Text: "PASSAGE AROUND THE OLD TEXT",
				Turns: []memory.PassageTurn{{Key: "x:1", Role: "assistant", Text: "around"}, {Key: "x:2", Role: "user", Text: "old", Hit: true}}},
			{Conversation: "c", Kind: "summary", Ref: "c:v1", Text: "RECALLED OLD SUMMARY"},
			{Conversation: "d", Kind: "message", Ref: "y:2", Text: "PASSAGE OF ANOTHER CHAT"},
		}}, nil
	})
	a, err := NewAssembler(Deps{History: mem, Summaries: mem, Facts: mem, Recaller: rec, Heads: heads, Counter: byteCounter{}},
		Options{RecentMessages: 8, MaxContextTokens: 8000, CompletionReserve: 1024,
			Shares: Shares{Summary: 0.2, Pinned: 0.1, Facts: 0.15, Recall: 0.2}, FactsMax: 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	edited := slices.Clone(stored)
	edited[2].Content = "my phone is private"
	kept := []string{"555-0101", "555-0102", "555-0103", "PASSAGE OF ANOTHER CHAT"}
	gone := []string{"555-0100", "SUMMARY OF THE OLD TEXT", "PASSAGE OF THE OLD TEXT", "PASSAGE AROUND THE OLD TEXT", "RECALLED OLD SUMMARY"}
	for _, tc := range []struct {
		name    string
		req     memory.Request
		shown   []string
		leftOut []string
	}{
		// The summary, of messages all in view, is not needed.
		{"resent unchanged", request(t, memory.ModeOn, rawTurns(stored, "next?")...), append(slices.Clone(kept), gone[0], gone[2], gone[3]), nil},
		{"resent edited", request(t, memory.ModeOn, rawTurns(edited, "next?")...), kept, gone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Prepare(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			text := joined(p)
			checkShown(t, text, tc.shown, tc.leftOut)
		})
	}
}

// TestPrepareShowsNoKeptBlockToAnEdit: with KeepRecallResent, a resent
// turn is rendered with the recalled block it was sent with, which may
// show the old text (recalled where the window no longer showed it); the request
// carrying an edit of a message the summary covers renders its resent
// turns without their kept blocks, while a request resending the history
// unchanged shows them.
func TestPrepareShowsNoKeptBlockToAnEdit(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	stored := editChat(6)
	for i := range stored {
		stored[i].Key = fmt.Sprintf("x:%d", i)
	}
	stored[2].Content = "my phone is 555-0100"
	// The old text, recalled where the prompt's window no longer shows it.
	items := []memory.Item{{ID: 1, Kind: "message", Ref: "x:2", Conversation: "c", Score: 1,
		Text: "Earlier: my phone is 555-0100.", CreatedAt: now.Add(-time.Hour)}}
	rec := recallFunc(func(context.Context, memory.RecallQuery) (memory.Recalled, error) {
		return memory.Recalled{Items: items}, nil
	})
	mem := &fakeMemory{stored: stored, summary: &memory.Summary{Version: 1, FromSeq: 1, ToSeq: stored[3].Seq,
		Text: "SUMMARY", Summariser: memory.SummariserModel}}
	a, err := NewAssembler(Deps{History: mem, Summaries: mem, Recaller: rec, Heads: &fakeHeads{live: stored},
		Revisions: &messageRevisions{messages: 7}, Counter: byteCounter{}},
		Options{RecentMessages: 10, MaxContextTokens: 4000, Shares: Shares{Facts: 0.2, Recall: 0.5}, FactsMax: 20,
			FillRecall: true, FillWhen: FillAsked, KeepRecallResent: true, Now: func() time.Time { return now }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	prep := func(raws []string) string {
		t.Helper()
		p, err := a.Prepare(context.Background(), request(t, memory.ModeOn, raws...))
		if err != nil {
			t.Fatal(err)
		}
		return joined(p)
	}
	if p := prep(rawTurns(stored, "What is my phone number?")); !strings.Contains(p, "Earlier: my phone is 555-0100.") {
		t.Fatalf("the asking turn recalled nothing:\n%s", p)
	}
	items = nil // later requests recall nothing: what they show of the old text is the kept block
	if p := prep(rawTurns(stored, "What is my phone number?", "It is 555-0100.", "Thanks.")); !strings.Contains(p, "Earlier: my phone is 555-0100.") {
		t.Fatalf("a resent turn is not shown with its kept block:\n%s", p)
	}
	edited := slices.Clone(stored)
	edited[2].Content = "my phone is private"
	if p := prep(rawTurns(edited, "What is my phone number?", "I do not know it.", "Thanks.")); strings.Contains(p, "555-0100") {
		t.Fatalf("the request carrying the edit is shown the old number in a kept block:\n%s", p)
	}
}

// TestPrepareLeavesOutWhatAnEditOfANewMessageUnsays: an edit of a message
// no summary covers — the conversation has none yet, or the message is
// newer than the summary's end — is assembled before its save retracts
// what the old text alone stated too; its prompt leaves out the pinned
// and recalled facts only that message stated and the passages showing
// it, and keeps the rest, the summary and its recalled versions included
// (they do not cover the edit). A history resent unchanged, one longer
// than a request stores (HistoryKeep: its window is aligned, not its
// start), and a client sending only its newest turn are shown all of it.
func TestPrepareLeavesOutWhatAnEditOfANewMessageUnsays(t *testing.T) {
	stored := editChat(8)
	for i := range stored {
		stored[i].Content += strings.Repeat(" padding", 10)
		stored[i].Key = fmt.Sprintf("x:%d", i)
	}
	stored[6].Content = "my phone is 555-0100" + strings.Repeat(" padding", 10)
	pin := func(key, value, source string, mentions int) memory.Fact {
		return memory.Fact{Type: memory.FactPreference, Key: key, Value: value, Pinned: true, Confidence: 1,
			Mentions: mentions, Conversation: "c", Source: source}
	}
	facts := []memory.Fact{
		pin("phone", "555-0100", "x:6", 1),                // only the edited text stated it
		pin("tea", "likes green tea 555-0101", "x:6", 2),  // stated again elsewhere
		pin("city", "lives in Lisbon 555-0102", "x:0", 1), // an unedited message's
		pin("reply", "the reply said 555-0104", "x:7", 1), // the reply after it, changed or not
	}
	items := []memory.Item{
		{Conversation: "c", Kind: "message", Ref: "x:6", Text: "PASSAGE OF THE OLD TEXT"},
		{Conversation: "c", Kind: "summary", Ref: "c:v1", Text: "RECALLED SUMMARY"},
		{Conversation: "d", Kind: "message", Ref: "y:6", Text: "PASSAGE OF ANOTHER CHAT"},
	}
	rec := recallFunc(func(context.Context, memory.RecallQuery) (memory.Recalled, error) {
		return memory.Recalled{Facts: facts, Items: items}, nil
	})
	edited := slices.Clone(stored)
	edited[6].Content = "my phone is private"
	// The summary ending before the edit is shown (its history
	// overflows no budget here: the recalled version stands for it).
	kept := []string{"555-0101", "555-0102", "555-0104", "PASSAGE OF ANOTHER CHAT", "RECALLED SUMMARY"}
	gone := []string{"555-0100", "PASSAGE OF THE OLD TEXT"}
	// A client may resend a reply otherwise than it was stored (its
	// thinking left out, say): no edit of what the user said.
	changedReply := slices.Clone(stored)
	changedReply[7].Content = "message 7, trimmed"
	for _, sum := range []struct {
		name    string
		summary *memory.Summary
	}{
		{"no summary", nil},
		{"a summary ending before the edit", &memory.Summary{Version: 1, FromSeq: 1, ToSeq: stored[3].Seq,
			Text: "THE SUMMARY", Summariser: memory.SummariserModel}},
	} {
		for _, tc := range []struct {
			name    string
			req     memory.Request
			shown   []string
			leftOut []string
		}{
			{"resent unchanged", request(t, memory.ModeOn, rawTurns(stored, "next?")...), append(slices.Clone(kept), gone[0]), nil},
			{"resent edited", request(t, memory.ModeOn, rawTurns(edited, "next?")...), kept, gone},
			{"a reply resent changed", request(t, memory.ModeOn, rawTurns(changedReply, "next?")...), append(slices.Clone(kept), gone...), nil},
			// The stored turns show the message; its passage is not repeated.
			{"newest turn only", request(t, memory.ModeOn, rawTurns(nil, "next?")...), append(slices.Clone(kept[:4]), gone[0]), nil},
		} {
			t.Run(sum.name+"/"+tc.name, func(t *testing.T) {
				mem := &fakeMemory{stored: stored, facts: facts, summary: sum.summary}
				heads := &fakeHeads{live: stored}
				a, err := NewAssembler(Deps{History: mem, Summaries: mem, Facts: mem, Recaller: rec, Heads: heads, Counter: byteCounter{}},
					Options{RecentMessages: 8, MaxContextTokens: 8000, CompletionReserve: 1024,
						Shares: Shares{Summary: 0.2, Pinned: 0.1, Facts: 0.15, Recall: 0.2}, FactsMax: 20}, nil)
				if err != nil {
					t.Fatal(err)
				}
				p, err := a.Prepare(context.Background(), tc.req)
				if err != nil {
					t.Fatal(err)
				}
				if heads.reads > 1 {
					t.Errorf("the conversation's first messages were read %d times, want at most once", heads.reads)
				}
				text := joined(p)
				if sum.summary != nil {
					_, rest := splitSystem(tc.req.Messages)
					earlier, _ := memory.SplitCurrent(rest)
					ld, err := a.load(context.Background(), tc.req, rest, len(earlier) > 0)
					if err != nil {
						t.Fatal(err)
					}
					if ld.summary == nil || ld.summaryEdited {
						t.Errorf("the summary, which covers no edited message, is left out")
					}
				}
				for _, s := range tc.shown {
					if s == "RECALLED SUMMARY" && sum.summary != nil {
						continue // the summary itself may stand for it
					}
					if !strings.Contains(text, s) {
						t.Errorf("%q is not shown:\n%s", s, text)
					}
				}
				checkShown(t, text, nil, tc.leftOut)
			})
		}
	}
}

// TestPrepareReadsNoHeadForNothingToLeaveOut: a full-history request with
// no summary whose memory holds nothing of its conversation an edit could
// take back (no fact stated once by one of its messages, no passage of
// it) does not read the conversation's first messages; one whose memory
// holds such a fact does.
func TestPrepareReadsNoHeadForNothingToLeaveOut(t *testing.T) {
	stored := editChat(6)
	for i := range stored {
		stored[i].Key = fmt.Sprintf("x:%d", i)
	}
	for _, tc := range []struct {
		name  string
		facts []memory.Fact
		reads int
	}{
		{"no facts", nil, 0},
		{"another conversation's fact", []memory.Fact{{Key: "k", Value: "v", Pinned: true, Mentions: 1, Conversation: "d", Source: "y:1"}}, 0},
		{"a fact stated twice", []memory.Fact{{Key: "k", Value: "v", Pinned: true, Mentions: 2, Conversation: "c", Source: "x:2"}}, 0},
		{"a fact of the API", []memory.Fact{{Key: "k", Value: "v", Pinned: true, Mentions: 1}}, 0},
		{"an unpinned fact stated once here, no recall", []memory.Fact{{Key: "k", Value: "v", Mentions: 1, Conversation: "c", Source: "x:2"}}, 0},
		{"a fact stated once here", []memory.Fact{{Key: "k", Value: "v", Pinned: true, Mentions: 1, Conversation: "c", Source: "x:2"}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			heads := &fakeHeads{live: stored}
			mem := &fakeMemory{stored: stored, facts: tc.facts}
			a, err := NewAssembler(Deps{History: mem, Facts: mem, Heads: heads, Counter: byteCounter{}},
				Options{RecentMessages: 8, MaxContextTokens: 8000, Shares: Shares{Pinned: 0.1}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Prepare(context.Background(), request(t, memory.ModeOn, rawTurns(stored, "next?")...)); err != nil {
				t.Fatal(err)
			}
			if heads.reads != tc.reads {
				t.Fatalf("read the conversation's first messages %d times, want %d", heads.reads, tc.reads)
			}
		})
	}
}

// TestPrepareJudgesACutHistoryByItsHead: a history longer than one
// request stores (Options.HistoryKeep) is stored as its first
// memory.BranchHead messages and a window of its newest, which the
// conversation's first messages do not show in order. Resent unchanged,
// with or without a summary reaching into the window, it is no edit: its
// prompt shows the summary (its history overflows) and the pins of the
// window's messages. An edit among its first messages is judged as any:
// the pin only that message stated is left out.
func TestPrepareJudgesACutHistoryByItsHead(t *testing.T) {
	const keep = 4
	history := editChat(memory.BranchHead + 20)
	for i := range history {
		history[i].Key = fmt.Sprintf("x:%d", i)
	}
	early, late := 10, len(history)-2 // user messages of the head and of the window
	history[early].Content = "my city is Lisbon"
	history[late].Content = "my phone is 555-0100"
	// What the conversation holds: the cut's head and window.
	stored := slices.Concat(history[:memory.BranchHead], history[len(history)-keep:])
	for i := range stored {
		stored[i].Seq = int64(i + 1)
	}
	fact := func(key, value, source string) memory.Fact {
		return memory.Fact{Type: memory.FactPreference, Key: key, Value: value, Pinned: true, Confidence: 1,
			Mentions: 1, Conversation: "c", Source: source}
	}
	facts := []memory.Fact{fact("phone", "555-0100", history[late].Key), fact("city", "Lisbon", history[early].Key)}
	edited := slices.Clone(history)
	edited[early].Content = "my city is a secret"
	summary := &memory.Summary{Version: 1, FromSeq: 1, ToSeq: stored[len(stored)-2].Seq, Text: "THE SUMMARY", Summariser: memory.SummariserModel}
	for _, tc := range []struct {
		name    string
		summary *memory.Summary
		msgs    []memory.Message
		shown   []string
		leftOut []string
	}{
		{"resent unchanged", nil, history, []string{"phone: 555-0100", "city: Lisbon"}, nil},
		{"resent unchanged, with a summary", summary, history, []string{"phone: 555-0100", "city: Lisbon", "THE SUMMARY"}, nil},
		{"an early message edited", nil, edited, []string{"phone: 555-0100"}, []string{"Lisbon"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := &fakeMemory{stored: stored, facts: facts, summary: tc.summary}
			a, err := NewAssembler(Deps{History: mem, Summaries: mem, Facts: mem, Heads: &fakeHeads{live: stored}, Counter: byteCounter{}},
				Options{RecentMessages: 8, MaxContextTokens: 6000, HistoryKeep: keep, Shares: Shares{Summary: 0.1, Pinned: 0.1}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := a.Prepare(context.Background(), request(t, memory.ModeOn, rawTurns(tc.msgs, "next?")...))
			if err != nil {
				t.Fatal(err)
			}
			text := joined(p)
			checkShown(t, text, tc.shown, tc.leftOut)
		})
	}
}

// checkShown fails t for each of shown that text lacks and each of
// leftOut that it holds.
func checkShown(t *testing.T, text string, shown, leftOut []string) {
	t.Helper()
	for _, s := range shown {
		if !strings.Contains(text, s) {
			t.Errorf("%q is not shown:\n%s", s, text)
		}
	}
	for _, s := range leftOut {
		if strings.Contains(text, s) {
			t.Errorf("%q is shown:\n%s", s, text)
		}
	}
}

// rawTurns renders history, then more as turns alternating from the user's,
// as the raw Chat Completions messages a client resends (role and content).
func rawTurns(history []memory.Message, more ...string) []string {
	var out []string
	for _, m := range history {
		raw, _ := json.Marshal(map[string]string{"role": m.Role, "content": m.Content})
		out = append(out, string(raw))
	}
	for i, s := range more {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		raw, _ := json.Marshal(map[string]string{"role": role, "content": s})
		out = append(out, string(raw))
	}
	return out
}
