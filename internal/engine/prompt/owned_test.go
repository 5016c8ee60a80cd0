package prompt

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/tokens"
)

// TestPrepareCountsForItsOwner: a request counts through its owner's view
// of the counter (Deps.Owned). What one user's request had counted — its
// messages, the stored turns, the summary and facts of the memory block —
// is counted anew for a user of another tenant and another user of the
// same tenant, and answered from the memo for the same user's next
// request: the latency of a request tells nothing of what other owners
// sent. So with memory injected or not (a write-only request is counted
// too); nothing of a request is counted through the shared counter.
func TestPrepareCountsForItsOwner(t *testing.T) {
	long := strings.Repeat("a turn long enough for its count to be remembered ", 3)
	day := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	mem := &fakeMemory{
		stored: msgs(t, fmt.Sprintf(`{"role":"user","content":%q}`, "earlier: "+long),
			fmt.Sprintf(`{"role":"assistant","content":%q}`, "reply: "+long)),
		summary: &memory.Summary{Version: 1, FromSeq: 1, ToSeq: 1, Text: "The user said: " + long, CoveredTokens: 100},
		facts:   []memory.Fact{{Type: memory.FactGoal, Value: "I want " + long, Pinned: true}},
	}
	for _, mode := range []memory.Mode{memory.ModeOn, memory.ModeWrite} {
		t.Run(string(mode), func(t *testing.T) {
			c, err := tokens.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := NewAssembler(Deps{History: mem, Summaries: mem, Facts: mem, Counter: windowsOnly{c, t},
				Owned: func(tenant, user string) TokenCounter { return c.Owned(tenant, user) }}, Options{
				RecentMessages: 10, Shares: Shares{Summary: 0.3, Pinned: 0.1, Facts: 0.1}, FactsMax: 5,
				Now: func() time.Time { return day },
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			// counted reports whether the request of tenant's user
			// tokenized anything: whether the memo did not answer it all.
			counted := func(tenant, user string) bool {
				t.Helper()
				req := request(t, mode, `{"role":"system","content":"You are terse."}`,
					fmt.Sprintf(`{"role":"user","content":%q}`, "now: "+long))
				req.Tenant, req.User = tenant, user
				before := c.Work()
				p, err := a.Prepare(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if mode.Injects() && p.Parts[partSummary] == 0 {
					t.Fatalf("no summary in the prompt (parts %v): the memory block was not counted", p.Parts)
				}
				return c.Work() != before
			}
			if !counted("acme", "alice") {
				t.Fatal("alice's first request counted nothing")
			}
			if counted("acme", "alice") {
				t.Error("alice's second request was not answered from the memo")
			}
			for _, other := range []struct{ tenant, user string }{{"globex", "alice"}, {"acme", "bob"}} {
				if !counted(other.tenant, other.user) {
					t.Errorf("%s/%s's request was answered from alice's counts", other.tenant, other.user)
				}
			}
		})
	}
}

// windowsOnly answers the context windows of a counter: a count asked of
// it is an error.
type windowsOnly struct {
	TokenCounter
	t *testing.T
}

func (w windowsOnly) shared() int {
	w.t.Helper()
	w.t.Error("counted through the shared counter")
	return 0
}

func (w windowsOnly) Messages(string, []json.RawMessage) int { return w.shared() }
func (w windowsOnly) RawMessage(string, json.RawMessage) int { return w.shared() }
func (w windowsOnly) Message(string, memory.Message) int     { return w.shared() }
func (w windowsOnly) Text(string, string) int                { return w.shared() }
func (w windowsOnly) SystemMessage(string, string) int       { return w.shared() }
