package enrich

import (
	"context"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestCompactCountsForItsOwner: with Options.Owned, a compaction counts
// the conversation's messages and its summary through its owner's counter,
// taken once, and nothing through the shared one: counts of one user's
// text are not found again for another's.
func TestCompactCountsForItsOwner(t *testing.T) {
	st := &memStore{}
	for i, m := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		st.add([]string{"user", "assistant"}[i%2], m)
	}
	var owners []string
	c := New(st, st, &fakeSummarizer{}, nil, sharedCounter{t}, Options{
		RecentTokens: 100, HighWatermark: 0.9, LowWatermark: 0.4,
		MaxMessages: 6, KeepMessages: 3, MaxSummaryTokens: 50, FallbackAfter: 3, MaxFacts: 10,
		Owned: func(tenant, user string) TokenCounter {
			owners = append(owners, tenant+"/"+user)
			return wordCounter{}
		},
	}, nil)
	if err := c.Compact(context.Background(), testID, "m"); err != nil {
		t.Fatal(err)
	}
	if len(st.summaries) != 1 || st.summaries[0].Tokens == 0 {
		t.Fatalf("summaries %+v, want one, counted", st.summaries)
	}
	if want := []string{testID.Tenant + "/" + testID.User}; !slices.Equal(owners, want) {
		t.Errorf("counters taken for %q, want %q", owners, want)
	}
}

// sharedCounter is a counter nothing may count with.
type sharedCounter struct{ t *testing.T }

func (c sharedCounter) Message(string, memory.Message) int {
	c.t.Error("a message counted through the shared counter")
	return 0
}

func (c sharedCounter) Text(string, string) int {
	c.t.Error("a text counted through the shared counter")
	return 0
}
