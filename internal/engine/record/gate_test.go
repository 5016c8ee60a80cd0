package record

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/memgate/memgate/internal/memory"
)

// gateSaver is a BatchSaver and DeadLetterer whose saves wait for gate to
// close, and which refuses exchanges matching refuse as invalid.
type gateSaver struct {
	gate   chan struct{}
	refuse func(memory.Exchange) bool

	mu     sync.Mutex
	saved  map[string]memory.Exchange
	order  []string
	groups int
	dead   []memory.DeadLetter
}

func newGateSaver() *gateSaver {
	return &gateSaver{gate: make(chan struct{}), saved: map[string]memory.Exchange{}}
}

func (s *gateSaver) wait(ctx context.Context) error {
	select {
	case <-s.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *gateSaver) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	if err := s.wait(ctx); err != nil {
		return memory.SaveResult{}, err
	}
	if s.refuse != nil && s.refuse(ex) {
		return memory.SaveResult{}, fmt.Errorf("refused: %w", memory.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.saved[ex.ID]; ok {
		return memory.SaveResult{Duplicate: true}, nil
	}
	s.saved[ex.ID] = ex
	s.order = append(s.order, ex.ID)
	return memory.SaveResult{Inserted: len(ex.Turn) + 1}, nil
}

func (s *gateSaver) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	for _, ex := range exs {
		if s.refuse != nil && s.refuse(ex) {
			return nil, fmt.Errorf("refused: %w", memory.ErrInvalid)
		}
	}
	out := make([]memory.SaveResult, len(exs))
	for i, ex := range exs {
		out[i], _ = s.SaveExchange(ctx, ex)
	}
	s.mu.Lock()
	s.groups++
	s.mu.Unlock()
	return out, nil
}

func (s *gateSaver) DeadLetter(ctx context.Context, d memory.DeadLetter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead = append(s.dead, d)
	return nil
}

func (s *gateSaver) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}
