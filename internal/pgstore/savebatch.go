package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
)

// SaveExchanges stores exchanges in one transaction (a group commit: one
// WAL flush for all of them), each as SaveExchange would; results[i] is
// exs[i]'s. The exchanges of one conversation are stored in the order given;
// different conversations are taken in key order, so concurrent batches lock
// conversation rows in the same order and never deadlock. It is all or
// nothing: on any error nothing is stored and the caller saves them one by
// one to tell which one failed.
func (s *Store) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	for _, ex := range exs {
		if err := validExchange(ex); err != nil {
			return nil, err
		}
	}
	order := make([]int, len(exs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		x, y := exs[a].Identity, exs[b].Identity
		return cmp.Or(cmp.Compare(x.Tenant, y.Tenant), cmp.Compare(x.User, y.User), cmp.Compare(x.Conversation, y.Conversation))
	})
	results := make([]memory.SaveResult, len(exs))
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		for _, i := range order {
			at := exs[i].At
			if at.IsZero() {
				at = time.Now()
			}
			res, err := saveExchange(ctx, tx, exs[i], at)
			if err != nil {
				return fmt.Errorf("exchange %s: %w", exs[i].ID, err)
			}
			results[i] = res
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: save %d exchanges: %w", len(exs), permanent(err))
	}
	return results, nil
}
