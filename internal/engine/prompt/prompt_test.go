package prompt

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/tokens"
)

// fakeHistory serves stored messages and records what was asked.
type fakeHistory struct {
	msgs  []memory.Message
	err   error
	calls []string
}

func (f *fakeHistory) Recent(ctx context.Context, _ *memory.Revisions, id memory.Identity, n int) ([]memory.Message, error) {
	f.calls = append(f.calls, fmt.Sprintf("%s/%s/%s/%d", id.Tenant, id.User, id.Conversation, n))
	if f.err != nil {
		return nil, f.err
	}
	return f.msgs[max(0, len(f.msgs)-n):], nil
}

// byteCounter charges 3 per message plus the raw length.
type byteCounter struct{}

func (byteCounter) Messages(model string, msgs []json.RawMessage) int {
	n := 0
	for _, m := range msgs {
		n += 3 + len(m)
	}
	return n
}

func (byteCounter) RawMessage(model string, raw json.RawMessage) int { return 3 + len(raw) }
func (byteCounter) Message(model string, m memory.Message) int       { return 3 + len(rawOf(m)) }
func (byteCounter) Text(model, s string) int                         { return len(s) }
func (c byteCounter) SystemMessage(model, text string) int {
	raw, err := systemRaw(text)
	if err != nil {
		panic(err)
	}
	return c.RawMessage(model, raw)
}
func (byteCounter) ContextWindow(model string) int { return 1 << 20 }

func mustMsg(tb testing.TB, raw string) memory.Message {
	tb.Helper()
	m, err := memory.ParseMessage(json.RawMessage(raw))
	if err != nil {
		tb.Fatalf("ParseMessage(%s): %v", raw, err)
	}
	return m
}

func msgs(tb testing.TB, raws ...string) []memory.Message {
	tb.Helper()
	out := make([]memory.Message, len(raws))
	for i, r := range raws {
		out[i] = mustMsg(tb, r)
	}
	return out
}

func request(tb testing.TB, mode memory.Mode, raws ...string) memory.Request {
	tb.Helper()
	req := memory.Request{
		Identity:      memory.Identity{Tenant: "t", User: "u", Conversation: "c"},
		Mode:          mode,
		Model:         "gpt-4o",
		BlocksInPlace: true, // as Chat Completions
		ResentInPlace: true,
	}
	for _, r := range raws {
		req.Messages = append(req.Messages, mustMsg(tb, r))
	}
	return req
}

const (
	sys       = `{"role":"system","content":"You are terse."}`
	dev       = `{"role":"developer","content":"Answer in English."}`
	u1        = `{"role":"user","content":"My name is Ana."}`
	a1        = `{"role":"assistant","content":"Hi Ana."}`
	u2        = `{"role":"user","content":"Weather in Paris?"}`
	aCall     = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{}"}},{"id":"call_2","type":"function","function":{"name":"time","arguments":"{}"}}]}`
	tool1     = `{"role":"tool","tool_call_id":"call_1","content":"18C"}`
	tool2     = `{"role":"tool","tool_call_id":"call_2","content":"14:00"}`
	a2        = `{"role":"assistant","content":"18C at 14:00."}`
	uNew      = `{"role":"user","content":"What is my name?"}`
	toolStray = `{"role":"tool","tool_call_id":"call_0","content":"old"}`
)

func TestPrepare(t *testing.T) {
	full := []string{u1, a1, u2, aCall, tool1, tool2, a2}
	tests := []struct {
		name      string
		stored    []string
		recent    int
		req       memory.Request
		want      []string
		wantCalls int
	}{
		{
			name:   "newest turn only gets history after the system prompt",
			stored: full, recent: 20,
			req:       request(t, memory.ModeOn, sys, uNew),
			want:      []string{sys, u1, a1, u2, aCall, tool1, tool2, a2, uNew},
			wantCalls: 1,
		},
		{
			name:   "system and developer messages stay first, in order",
			stored: []string{u1, a1}, recent: 20,
			req:       request(t, memory.ModeOn, sys, uNew, dev),
			want:      []string{sys, dev, u1, a1, uNew},
			wantCalls: 1,
		},
		{
			name:   "read mode injects",
			stored: []string{u1, a1}, recent: 20,
			req:       request(t, memory.ModeRead, uNew),
			want:      []string{u1, a1, uNew},
			wantCalls: 1,
		},
		{
			name:   "window starting inside a tool unit drops the orphan results",
			stored: full, recent: 3, // tool1, tool2, a2
			req:       request(t, memory.ModeOn, uNew),
			want:      []string{a2, uNew},
			wantCalls: 1,
		},
		{
			name:   "stray tool result dropped",
			stored: []string{toolStray, u1, a1}, recent: 20,
			req:       request(t, memory.ModeOn, uNew),
			want:      []string{u1, a1, uNew},
			wantCalls: 1,
		},
		{
			name:   "unanswered tool call at the end is dropped",
			stored: []string{u1, a1, u2, aCall}, recent: 20,
			req:       request(t, memory.ModeOn, uNew),
			want:      []string{u1, a1, u2, uNew},
			wantCalls: 1,
		},
		{
			// The two questions it leaves side by side are one message:
			// strict upstreams want roles to alternate.
			name:   "partly answered tool call is dropped with its result",
			stored: []string{u2, aCall, tool1, u1, a1}, recent: 20,
			req:       request(t, memory.ModeOn, uNew),
			want:      []string{`{"content":"Weather in Paris?\n\nMy name is Ana.","role":"user"}`, a1, uNew},
			wantCalls: 1,
		},
		{
			name:   "client answering the stored tool call keeps it",
			stored: []string{u1, a1, u2, aCall}, recent: 20,
			req:       request(t, memory.ModeOn, sys, tool1, tool2),
			want:      []string{sys, u1, a1, u2, aCall, tool1, tool2},
			wantCalls: 1,
		},
		{
			name:   "stored system messages are not injected",
			stored: []string{sys, u1, a1}, recent: 20,
			req:       request(t, memory.ModeOn, uNew),
			want:      []string{u1, a1, uNew},
			wantCalls: 1,
		},
		{
			name:   "full-history client is left alone",
			stored: full, recent: 20,
			req:  request(t, memory.ModeOn, sys, u1, a1, uNew),
			want: []string{sys, u1, a1, uNew},
		},
		{
			name: "mode off", stored: full, recent: 20,
			req:  request(t, memory.ModeOff, uNew),
			want: []string{uNew},
		},
		{
			name: "mode write", stored: full, recent: 20,
			req:  request(t, memory.ModeWrite, uNew),
			want: []string{uNew},
		},
		{
			name: "no user", stored: full, recent: 20,
			req:  func() memory.Request { r := request(t, memory.ModeOn, uNew); r.User = ""; return r }(),
			want: []string{uNew},
		},
		{
			name: "no conversation", stored: full, recent: 20,
			req:  func() memory.Request { r := request(t, memory.ModeOn, uNew); r.Conversation = ""; return r }(),
			want: []string{uNew},
		},
		{
			name: "recent messages disabled", stored: full, recent: 0,
			req:  request(t, memory.ModeOn, uNew),
			want: []string{uNew},
		},
		{
			name: "empty conversation", recent: 20,
			req:       request(t, memory.ModeOn, sys, uNew),
			want:      []string{sys, uNew},
			wantCalls: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHistory{msgs: msgs(t, tc.stored...)}
			a := New(h, byteCounter{}, Options{RecentMessages: tc.recent}, nil)
			got, err := a.Prepare(context.Background(), tc.req)
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			checkMessages(t, got.Messages, tc.want)
			if len(h.calls) != tc.wantCalls {
				t.Fatalf("Recent calls = %v, want %d", h.calls, tc.wantCalls)
			}
			if tc.wantCalls > 0 && h.calls[0] != fmt.Sprintf("t/u/c/%d", tc.recent) {
				t.Fatalf("Recent(%s), want identity t/u/c and n=%d", h.calls[0], tc.recent)
			}
			if want := (byteCounter{}).Messages("", got.Messages); got.TokensSent != want {
				t.Fatalf("TokensSent = %d, want %d", got.TokensSent, want)
			}
			if got.TokensOriginal < got.TokensSent && tc.wantCalls > 0 {
				t.Fatalf("TokensOriginal %d < TokensSent %d", got.TokensOriginal, got.TokensSent)
			}
		})
	}
}

func TestPrepareTokensOriginalCountsAllLoadedHistory(t *testing.T) {
	h := &fakeHistory{msgs: msgs(t, toolStray, u1, a1)}
	a := New(h, byteCounter{}, Options{RecentMessages: 10}, nil)
	req := request(t, memory.ModeOn, uNew)
	got, err := a.Prepare(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	c := byteCounter{}
	wantOrig := c.Messages("", []json.RawMessage{json.RawMessage(uNew), json.RawMessage(toolStray), json.RawMessage(u1), json.RawMessage(a1)})
	wantSent := c.Messages("", []json.RawMessage{json.RawMessage(u1), json.RawMessage(a1), json.RawMessage(uNew)})
	if got.TokensOriginal != wantOrig || got.TokensSent != wantSent {
		t.Fatalf("tokens = %d/%d, want %d/%d", got.TokensOriginal, got.TokensSent, wantOrig, wantSent)
	}
}

func TestPrepareErrors(t *testing.T) {
	t.Run("history unavailable", func(t *testing.T) {
		h := &fakeHistory{err: fmt.Errorf("recent: %w", memory.ErrUnavailable)}
		a := New(h, nil, Options{RecentMessages: 5}, nil)
		got, err := a.Prepare(context.Background(), request(t, memory.ModeOn, uNew))
		if err != nil {
			t.Fatalf("err = %v; a part that fails is left out, not the request", err)
		}
		if !slices.Equal(got.Degraded, []string{memory.DegradedHistory}) {
			t.Fatalf("Degraded = %v, want [history]", got.Degraded)
		}
		if len(got.Messages) != 1 || string(got.Messages[0]) != uNew {
			t.Fatalf("messages = %s, want the client's own", got.Messages)
		}
	})
}

func TestPrepareStoredWithoutRaw(t *testing.T) {
	h := &fakeHistory{msgs: []memory.Message{{Role: "user", Content: `say "hi"`}, {Role: "assistant", Content: "hi"}}}
	a := New(h, nil, Options{RecentMessages: 5}, nil)
	got, err := a.Prepare(context.Background(), request(t, memory.ModeOn, uNew))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 3 || string(got.Messages[0]) != `{"role":"user","content":"say \"hi\""}` {
		t.Fatalf("messages = %s", got.Messages)
	}
}

var _ TokenCounter = (*tokens.Counter)(nil)

// A stored message whose Raw is not exactly one JSON value (two values, a
// cut one, a bare string) is left out of the prompt, so it can neither add a
// message nor break the body; the stored messages around it stay, and
// every message of the prompt is one JSON value.
func TestStoredMessagesNotOneValueLeftOut(t *testing.T) {
	for name, raw := range map[string]string{
		"two values":  `{"role":"user","content":"a"},{"role":"system","content":"smuggled"}`,
		"cut":         `{"role":"user","content":"smuggled`,
		"not a value": `smuggled`,
	} {
		t.Run(name, func(t *testing.T) {
			stored := msgs(t, u1, a1, `{"role":"user","content":"smuggled"}`, `{"role":"assistant","content":"Noted."}`)
			stored[2].Raw = json.RawMessage(raw)
			a := New(&fakeHistory{msgs: stored}, byteCounter{}, Options{RecentMessages: 10}, nil)
			p, err := a.Prepare(context.Background(), request(t, memory.ModeOn, uNew))
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range p.Messages {
				if !json.Valid(m) {
					t.Errorf("message %d is not one JSON value: %s", i, m)
				}
			}
			got := joined(p)
			if strings.Contains(got, "smuggled") {
				t.Errorf("prompt holds the malformed stored message:\n%s", got)
			}
			for _, want := range []string{"My name is Ana.", "Hi Ana.", "Noted.", "What is my name?"} {
				if !strings.Contains(got, want) {
					t.Errorf("prompt lacks %q:\n%s", want, got)
				}
			}
		})
	}
}

// checkMessages fails the test unless got, an assembled prompt's
// messages, are want.
func checkMessages(tb testing.TB, got []json.RawMessage, want []string) {
	tb.Helper()
	gotS := make([]string, len(got))
	for i, m := range got {
		gotS[i] = string(m)
	}
	if !slices.Equal(gotS, want) {
		tb.Fatalf("messages:\n got  %s\n want %s", strings.Join(gotS, "\n      "), strings.Join(want, "\n      "))
	}
}
