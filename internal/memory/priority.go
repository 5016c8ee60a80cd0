package memory

import "context"

// backgroundKey marks a context as background work.
type backgroundKey struct{}

// Background returns ctx marked as work no client is waiting on
// (enrichment: fact extraction, summaries, indexing). A store whose writes
// take turns may let the writes a client waits on (capture's saves,
// erasures) go before the waiting background ones.
func Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// IsBackground reports whether ctx was marked by Background.
func IsBackground(ctx context.Context) bool {
	b, _ := ctx.Value(backgroundKey{}).(bool)
	return b
}
