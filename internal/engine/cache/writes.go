package cache

import (
	"context"

	"github.com/memgate/memgate/internal/memory"
)

// Writer is what of a store changes what Reads keep: its saves and its
// erasures.
type Writer interface {
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
	SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error)
	DeleteUser(ctx context.Context, tenant, user string) error
}

// Clearer is a cache an erasure empties whole: one whose entries name no
// owner (recall's embeddings).
type Clearer interface{ Clear() }

// Writes are a Writer's saves and erasures, brought to the caches too: a
// save to the newest turns held (Reads.Saved), an erasure, failed or not,
// to the Reads (Forget) and the embeddings (Clear).
type Writes struct {
	w   Writer
	r   *Reads
	emb Clearer // nil: none
}

// Through returns w's saves and erasures, brought to r and emb (nil: none).
func (r *Reads) Through(w Writer, emb Clearer) Writes { return Writes{w: w, r: r, emb: emb} }

// SaveExchange saves ex with the Writer and, saved, tells the Reads.
func (x Writes) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	res, err := x.w.SaveExchange(ctx, ex)
	if err == nil {
		x.r.Saved([]memory.Exchange{ex}, []memory.SaveResult{res})
	}
	return res, err
}

// SaveExchanges saves exs with the Writer and, saved, tells the Reads.
func (x Writes) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	res, err := x.w.SaveExchanges(ctx, exs)
	if err == nil {
		x.r.Saved(exs, res)
	}
	return res, err
}

// DeleteUser erases the user with the Writer, drops what the Reads hold
// of them and empties the embeddings.
func (x Writes) DeleteUser(ctx context.Context, tenant, user string) error {
	err := x.w.DeleteUser(ctx, tenant, user)
	x.r.Forget(tenant, user)
	if x.emb != nil {
		x.emb.Clear()
	}
	return err
}
