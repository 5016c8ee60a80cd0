package cache

import (
	"context"

	"github.com/memgate/memgate/internal/memory"
)

// Clearer is a cache an erasure empties whole (recall's embeddings).
type Clearer interface{ Clear() }

// SaveExchange saves ex with the store and, saved, tells the tails (Saved).
func (r *Reads) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	res, err := r.src.SaveExchange(ctx, ex)
	if err == nil {
		r.Saved([]memory.Exchange{ex}, []memory.SaveResult{res})
	}
	return res, err
}

// SaveExchanges saves exs with the store and, saved, tells the tails.
func (r *Reads) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	res, err := r.src.SaveExchanges(ctx, exs)
	if err == nil {
		r.Saved(exs, res)
	}
	return res, err
}

// DeleteUser erases the user with the store and, failed or not, drops
// what r holds of them (see Cache.Drop) and empties the embeddings.
func (r *Reads) DeleteUser(ctx context.Context, tenant, user string) error {
	err := r.src.DeleteUser(ctx, tenant, user)
	of := func(k convKey) bool { return k.Tenant == tenant && k.User == user }
	r.tails.Drop(of)
	r.facts.Drop(of)
	r.summaries.Drop(of)
	if r.emb != nil {
		r.emb.Clear()
	}
	return err
}
