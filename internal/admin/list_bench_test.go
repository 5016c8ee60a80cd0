package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// BenchmarkListManyConversations: GET /v1/memory/conversations of a user
// with 5,000 conversations of one exchange each, answered whole.
func BenchmarkListManyConversations(b *testing.B) {
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "many.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	raw, _ := json.Marshal(map[string]string{"role": "user", "content": "hello"})
	m, err := memory.ParseMessage(raw)
	if err != nil {
		b.Fatal(err)
	}
	const convs = 5_000
	at := time.Now().Add(-time.Hour)
	for i := 0; i < convs; i += 500 {
		var exs []memory.Exchange
		for j := i; j < i+500; j++ {
			id := memory.Identity{Tenant: memory.DefaultTenant, User: "u", Conversation: fmt.Sprintf("c%d", j)}
			exs = append(exs, memory.Exchange{ID: fmt.Sprintf("ex-%d", j), Identity: id, Model: "m",
				Turn: []memory.Message{m}, Reply: m, At: at.Add(time.Duration(j) * time.Millisecond)})
		}
		if _, err := st.SaveExchanges(context.Background(), exs); err != nil {
			b.Fatal(err)
		}
	}
	benchGet(b, conversationHandler(b, st), "/v1/memory/conversations?user=u")
}
