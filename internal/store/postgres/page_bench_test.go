package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// bulkConversation stores conversation "long" of user "u" in tenant "t"
// with n live messages (one exchange saved, the rest copied by SQL).
func bulkConversation(b *testing.B, s *Store, n int) memory.Identity {
	b.Helper()
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "long"}
	msg := func(role string) memory.Message {
		raw, _ := json.Marshal(map[string]string{"role": role, "content": "a message of a long conversation"})
		m, err := memory.ParseMessage(raw)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	ctx := context.Background()
	if _, err := s.SaveExchange(ctx, memory.Exchange{ID: "ex", Identity: id, Model: "m",
		Turn: []memory.Message{msg("user")}, Reply: msg("assistant"), At: time.Now()}); err != nil {
		b.Fatal(err)
	}
	// Counted by no trigger (0024): the copies need no revision counted.
	if _, err := s.pool.Exec(ctx, `BEGIN; SELECT set_config('memgate.messages_counted', 'on', true);
		INSERT INTO messages (tenant, user_id, conversation, seq, key, role, content, raw, tokens, created_at)
		SELECT tenant, user_id, conversation, g, 'bulk-' || g, role, content, raw, tokens, created_at
		FROM messages, generate_series(3, `+fmt.Sprint(n)+`) g WHERE tenant = 't' AND seq = 1; COMMIT`); err != nil {
		b.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE messages`); err != nil {
		b.Fatal(err)
	}
	return id
}

// benchLong runs op on a conversation of 20,000 and of 200,000 live
// messages (bulkConversation).
func benchLong(b *testing.B, op func(s *Store, id memory.Identity, n int) error) {
	for _, n := range []int{20_000, 200_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := mustOpen(b)
			id := bulkConversation(b, s, n)
			b.ReportAllocs()
			for b.Loop() {
				if err := op(s, id, n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConversationPageLong: the last page of 101 messages (a page of
// 100 and the one more that says whether more follow) of a long
// conversation.
func BenchmarkConversationPageLong(b *testing.B) {
	benchLong(b, func(s *Store, id memory.Identity, n int) error {
		c, msgs, err := s.ConversationPage(context.Background(), id, memory.Page{After: int64(n - 200), Limit: 101})
		if err == nil && (len(msgs) != 101 || c.MessageCount != n) {
			err = fmt.Errorf("%d messages, count %d", len(msgs), c.MessageCount)
		}
		return err
	})
}

// BenchmarkBranchesLong: the inspector's superseded branches of a long
// conversation (none superseded).
func BenchmarkBranchesLong(b *testing.B) {
	benchLong(b, func(s *Store, id memory.Identity, _ int) error {
		bs, err := s.Branches(context.Background(), id, 0)
		if err == nil && len(bs) != 0 {
			err = fmt.Errorf("%d branches", len(bs))
		}
		return err
	})
}
