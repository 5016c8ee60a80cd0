package recall

import (
	"context"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestIndexerPartsSplitWhatItIndexes: Messages indexes an exchange's
// messages and nothing derived from it; Derived, run after the side hooks
// wrote a summary and a fact, indexes those and no message. Together they
// index what AfterSaveBatch indexes.
func TestIndexerPartsSplitWhatItIndexes(t *testing.T) {
	ctx := context.Background()
	at := time.Now()
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	ex := memory.Exchange{ID: "e1", Identity: id, At: at,
		Turn: []memory.Message{{Role: "user", Content: "I am vegetarian"}}, Reply: memory.Message{Role: "assistant", Content: "Noted!"}}
	res := memory.SaveResult{Inserted: 2}
	st := newFakeStore()
	ix := NewIndexer(st, NewLocal(32), nil)
	if err := ix.Messages().AfterSaveBatch(ctx, []memory.Exchange{ex}, []memory.SaveResult{res}); err != nil {
		t.Fatal(err)
	}
	// What the side hooks write meanwhile.
	st.summary["t/u/c"] = memory.Summary{Conversation: "c", Version: 1, Text: "The user is vegetarian.", CreatedAt: at}
	st.facts = []memory.Fact{{ID: 7, Tenant: "t", User: "u", Type: memory.FactProfile, Key: "diet", Value: "vegetarian", UpdatedAt: at}}
	if got := itemRefs(st, KindMessage); !eqStrings(got, []string{"e1:0#0", "e1:1#0"}) {
		t.Fatalf("message items after Messages = %v", got)
	}
	if n := len(itemRefs(st, KindSummary)) + len(itemRefs(st, KindFact)); n != 0 {
		t.Fatalf("Messages indexed %d summary or fact items, want none", n)
	}
	st.mu.Lock()
	st.items = nil
	st.mu.Unlock()
	if err := ix.Derived().AfterSaveBatch(ctx, []memory.Exchange{ex}, []memory.SaveResult{res}); err != nil {
		t.Fatal(err)
	}
	if got := itemRefs(st, KindMessage); len(got) != 0 {
		t.Errorf("Derived indexed messages %v, want none", got)
	}
	if got := itemRefs(st, KindSummary); !eqStrings(got, []string{"c:v1#0"}) {
		t.Errorf("summary items after Derived = %v", got)
	}
	if got := itemRefs(st, KindFact); !eqStrings(got, []string{"7#0"}) {
		t.Errorf("fact items after Derived = %v", got)
	}
}
