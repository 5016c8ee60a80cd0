package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// storeAs returns the opened store as T: errNotConnected before the store
// was reached, errors.ErrUnsupported when the store lacks T.
func storeAs[T any](l *lateMemory) (T, error) {
	var zero T
	m := l.cur.Load()
	if m == nil {
		return zero, errNotConnected
	}
	v, ok := any(m.store).(T)
	if !ok {
		return zero, fmt.Errorf("store %T: %w", m.store, errors.ErrUnsupported)
	}
	return v, nil
}

// The reads and writes of the web inspector, the savings recorder and the
// import route, passed to the opened store or capturer like admin.Store's.

// Users implements ui.Inspector.
func (l *lateMemory) Users(ctx context.Context, tenant, match string, limit int) ([]memory.UserActivity, error) {
	s, err := storeAs[interface {
		Users(context.Context, string, string, int) ([]memory.UserActivity, error)
	}](l)
	if err != nil {
		return nil, err
	}
	return s.Users(ctx, tenant, match, limit)
}

// Branches implements ui.Inspector.
func (l *lateMemory) Branches(ctx context.Context, id memory.Identity) ([]memory.Branch, error) {
	s, err := storeAs[interface {
		Branches(context.Context, memory.Identity) ([]memory.Branch, error)
	}](l)
	if err != nil {
		return nil, err
	}
	return s.Branches(ctx, id)
}

// Summaries implements ui.Inspector.
func (l *lateMemory) Summaries(ctx context.Context, id memory.Identity) ([]memory.Summary, error) {
	s, err := storeAs[interface {
		Summaries(context.Context, memory.Identity) ([]memory.Summary, error)
	}](l)
	if err != nil {
		return nil, err
	}
	return s.Summaries(ctx, id)
}

// Footprint implements ui.Footprinter.
func (l *lateMemory) Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error) {
	s, err := storeAs[interface {
		Footprint(context.Context, string, string) (memory.Footprint, error)
	}](l)
	if err != nil {
		return memory.Footprint{}, err
	}
	return s.Footprint(ctx, tenant, user)
}

// SetFactPinned implements ui.FactPinner.
func (l *lateMemory) SetFactPinned(ctx context.Context, tenant, user string, id int64, pinned bool) error {
	s, err := storeAs[interface {
		SetFactPinned(context.Context, string, string, int64, bool) error
	}](l)
	if err != nil {
		return err
	}
	return s.SetFactPinned(ctx, tenant, user, id, pinned)
}

// Savings implements ui.SavingsReader.
func (l *lateMemory) Savings(ctx context.Context, tenant string, since time.Time) ([]memory.SavingsBucket, error) {
	s, err := storeAs[interface {
		Savings(context.Context, string, time.Time) ([]memory.SavingsBucket, error)
	}](l)
	if err != nil {
		return nil, err
	}
	return s.Savings(ctx, tenant, since)
}

// AddSavings implements savings.Store.
func (l *lateMemory) AddSavings(ctx context.Context, bs []memory.SavingsBucket) error {
	s, err := storeAs[interface {
		AddSavings(context.Context, []memory.SavingsBucket) error
	}](l)
	if err != nil {
		return err
	}
	return s.AddSavings(ctx, bs)
}

// ErasedAt implements admin.Erasures.
func (l *lateMemory) ErasedAt(ctx context.Context, tenant, user string) (time.Time, error) {
	s, err := storeAs[interface {
		ErasedAt(context.Context, string, string) (time.Time, error)
	}](l)
	if err != nil {
		return time.Time{}, err
	}
	return s.ErasedAt(ctx, tenant, user)
}

// Import implements admin.Capture through the opened capturer.
func (l *lateMemory) Import(ctx context.Context, exs []memory.Exchange) ([]record.Outcome, error) {
	m := l.cur.Load()
	if m == nil {
		return nil, errNotConnected
	}
	return m.capturer.Import(ctx, exs)
}
