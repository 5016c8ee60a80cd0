package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/storetest"
)

func TestCaptureContract(t *testing.T) {
	storetest.RunCapture(t, func(t *testing.T) storetest.CaptureStore { return mustOpen(t) })
}

// groupSaver stores every exchange through SaveExchanges, falling back to
// SaveExchange only where the capturer does (a concurrent save of the same
// exchange won), so the store contract checks the group commit's path.
type groupSaver struct{ *Store }

func (g groupSaver) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	res, err := g.SaveExchanges(ctx, []memory.Exchange{ex})
	if err != nil {
		if errors.Is(err, memory.ErrInvalid) || !isUniqueViolation(err, messageKeyConstraint) {
			return memory.SaveResult{}, err
		}
		return g.Store.SaveExchange(ctx, ex)
	}
	return res[0], nil
}

func TestStoreContractThroughGroupCommit(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) storetest.Store { return groupSaver{mustOpen(t)} })
}

func TestErasureContractThroughGroupCommit(t *testing.T) {
	storetest.RunErasure(t, func(t *testing.T) storetest.KnowledgeStore { return groupSaver{mustOpen(t)} })
}

func TestAdoptContractThroughGroupCommit(t *testing.T) {
	storetest.RunAdopt(t, func(t *testing.T) storetest.AdoptStore { return groupSaver{mustOpen(t)} })
}
