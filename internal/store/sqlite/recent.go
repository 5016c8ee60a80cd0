package sqlite

import (
	"context"
	"fmt"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/telemetry"
)

// Recent returns up to n newest live messages of the conversation, oldest
// first; none (and no error) for n <= 0 or an unknown conversation. The
// engine keeps them in memory (internal/engine/cache.Reads).
func (s *Store) Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
	defer telemetry.Span(&ctx, "sqlite.Recent")()
	if n <= 0 {
		return []memory.Message{}, nil
	}
	msgs, err := liveTail(ctx, s.reads, id, n)
	if err != nil {
		return nil, fmt.Errorf("recent messages: %w", err)
	}
	return msgs, nil
}
