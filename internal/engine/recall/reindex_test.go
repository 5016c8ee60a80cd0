package recall

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

func TestReindexIsResumable(t *testing.T) {
	ctx := context.Background()
	st := newFakeStore()
	old := NewLocal(16)
	var items []memory.Item
	for i := range 25 {
		items = append(items, memory.Item{Tenant: "t", User: "u", Ref: fmt.Sprintf("e:%d", i), Text: fmt.Sprintf("passage %d about Lisbon", i)})
	}
	mustIndex(t, st, old, items...)
	st.items[3].Embedding = nil // never embedded

	newEmb := &countingEmbedder{Embedder: NewLocal(32)}
	// Interrupt after the second batch.
	ictx, cancel := context.WithCancel(ctx)
	var reports []int
	done, err := Reindex(ictx, st, newEmb, 10, func(n int, _ int64) {
		reports = append(reports, n)
		if n >= 20 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || done != 20 {
		t.Fatalf("interrupted reindex = %d, %v; want 20, canceled", done, err)
	}
	done, err = Reindex(ctx, st, newEmb, 10, nil)
	if err != nil || done != 5 {
		t.Fatalf("resumed reindex = %d, %v; want the 5 left", done, err)
	}
	if newEmb.texts != 25 {
		t.Fatalf("embedded %d texts in all, want each of 25 once", newEmb.texts)
	}
	for _, it := range st.items {
		if it.Model != LocalModel || it.Dims != 32 || len(it.Embedding) != 32 {
			t.Fatalf("item %s not re-embedded: dims %d", it.Ref, it.Dims)
		}
	}
	if done, _ := Reindex(ctx, st, newEmb, 10, nil); done != 0 {
		t.Fatalf("a rerun re-embedded %d items", done)
	}
	if fmt.Sprint(reports) != "[10 20]" {
		t.Fatalf("progress = %v", reports)
	}
}
