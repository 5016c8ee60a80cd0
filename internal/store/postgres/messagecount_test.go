package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestMessageCountKept checks migration 0037: conversations.message_count
// counts the live messages whichever statement wrote them — plain SQL
// inserting many rows at once, superseding and restoring some, moving
// some to another conversation, deleting some — as count(*) over the
// conversation does, and a page reads it.
func TestMessageCountKept(t *testing.T) {
	s := mustOpen(t)
	ctx := testCtx(t)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "a"}
	other := memory.Identity{Tenant: "acme", User: "alice", Conversation: "b"}
	raw, _ := json.Marshal(map[string]string{"role": "user", "content": "hello"})
	m, err := memory.ParseMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []memory.Identity{id, other} {
		if _, err := s.SaveExchange(ctx, memory.Exchange{ID: "ex-" + c.Conversation, Identity: c, Model: "m",
			Turn: []memory.Message{m}, Reply: m, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	convs := []memory.Identity{id, other}
	check := func(step string) {
		t.Helper()
		for _, c := range convs {
			var live int
			if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM messages
				WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND superseded_at IS NULL`,
				c.Tenant, c.User, c.Conversation).Scan(&live); err != nil {
				t.Fatal(err)
			}
			conv, _, err := s.ConversationPage(ctx, c, memory.Page{Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if conv.MessageCount != live {
				t.Fatalf("after %s: conversation %s counts %d messages, %d are live", step, c.Conversation, conv.MessageCount, live)
			}
		}
	}
	check("the saves")
	for _, step := range []struct{ name, sql string }{
		{"a bulk insert", `INSERT INTO messages (tenant, user_id, conversation, seq, key, role, content, raw, tokens, created_at)
			SELECT tenant, user_id, conversation, g, 'bulk-' || g, role, content, raw, tokens, created_at
			FROM messages, generate_series(3, 1000) g WHERE tenant = 'acme' AND conversation = 'a' AND seq = 1`},
		{"a supersede", `UPDATE messages SET superseded_at = now() WHERE tenant = 'acme' AND conversation = 'a' AND seq > 600`},
		{"a restore and a supersede in one statement", `UPDATE messages SET superseded_at = CASE WHEN superseded_at IS NULL THEN now() END
			WHERE tenant = 'acme' AND conversation = 'a' AND seq BETWEEN 500 AND 700`},
		{"a move", `UPDATE messages SET conversation = 'b', seq = seq + 10000 WHERE tenant = 'acme' AND conversation = 'a' AND seq BETWEEN 100 AND 549`},
		{"a delete", `DELETE FROM messages WHERE tenant = 'acme' AND conversation = 'b' AND seq % 3 = 0`},
	} {
		if _, err := s.pool.Exec(ctx, step.sql); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		check(step.name)
	}
	if err := s.DeleteConversation(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	convs = convs[:1]
	check("a conversation deleted")
}
