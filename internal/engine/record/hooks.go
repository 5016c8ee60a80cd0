package record

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// ErrHook marks a failure of an after-save hook: the exchange itself was
// stored. The worker retries such an entry like a failed save, and after
// MaxHookAttempts deliveries acknowledges it anyway so one poisonous hook
// cannot stall the queue.
var ErrHook = errors.New("after-save hook failed")

// Hook runs after exchanges are stored: indexing for recall, fact
// extraction, compaction. It gets the exchanges of one batch in a single
// call (exs[i] stored with results[i], oldest first), so that work shared by
// exchanges of the same conversation or user — loading the conversation,
// compacting it, one embedding call, one write transaction — is done once
// per batch instead of once per exchange; a batch may hold one exchange. It
// must be idempotent, since a redelivered exchange (Duplicate) runs it
// again. A hook whose work is per exchange is adapted with EachExchange.
type Hook interface {
	AfterSaveBatch(ctx context.Context, exs []memory.Exchange, results []memory.SaveResult) error
}

// HookFunc adapts a function over a batch to Hook.
type HookFunc func(ctx context.Context, exs []memory.Exchange, results []memory.SaveResult) error

// AfterSaveBatch calls f.
func (f HookFunc) AfterSaveBatch(ctx context.Context, exs []memory.Exchange, results []memory.SaveResult) error {
	return f(ctx, exs, results)
}

// EachExchange adapts a per-exchange function to Hook: it calls f once per
// exchange of a batch, oldest first, even after one failed, and returns
// the failures joined. A failure that reports an erasure
// (memory.ErrErased) is left out: it can only be about that exchange's
// user, whom the store has already forgotten.
func EachExchange(f func(ctx context.Context, ex memory.Exchange, res memory.SaveResult) error) Hook {
	return HookFunc(func(ctx context.Context, exs []memory.Exchange, results []memory.SaveResult) error {
		var errs []error
		for i, ex := range exs {
			if err := f(ctx, ex, results[i]); err != nil && !errors.Is(err, memory.ErrErased) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// hooked is a Saver that runs hooks after each successful save.
type hooked struct {
	saver Saver
	hooks []Hook
}

// WithHooks returns a Saver that stores through saver and then runs every
// hook in order, for stored and duplicate exchanges (not for ones dropped
// because the user was erased, nor for ones their conversation refused),
// with results that carry their erasure
// guard (see guarded). A hook
// error is returned wrapped with ErrHook after the remaining hooks ran; one
// that only reports the user's erasure (memory.ErrErased) is not an error.
// The hooks run inside the save: a Capturer or Worker storing a chat
// under its chat lock (ChatLocks) holds it while they run, so hooks that
// call a model belong in WorkerOptions.Hooks or the Enricher, which run
// them after the lock is released.
func WithHooks(saver Saver, hooks ...Hook) Saver {
	if len(hooks) == 0 {
		return saver
	}
	return &hooked{saver: saver, hooks: hooks}
}

// SaveExchange stores ex, then runs the hooks.
func (h *hooked) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	res, err := h.saver.SaveExchange(ctx, ex)
	if err != nil || res.Dropped || res.Parted {
		return res, err
	}
	return res, RunHooks(ctx, h.hooks, []memory.Exchange{ex}, []memory.SaveResult{res})
}

// RunHooks runs every hook, in order, once over stored exchanges (oldest
// first), with results that carry their erasure guard (see guarded). A
// hook error is returned wrapped with ErrHook after the remaining hooks
// ran. An error that reports an erasure (memory.ErrErased) is dropped when
// it can only be about the erased user, in a batch of one user's
// exchanges; in a batch of several users it is returned, so the batch is
// redelivered and the erased user's exchanges come back Dropped.
func RunHooks(ctx context.Context, hooks []Hook, exs []memory.Exchange, results []memory.SaveResult) error {
	results = guarded(exs, results, time.Now())
	oneUser := true
	for _, ex := range exs[min(1, len(exs)):] {
		oneUser = oneUser && ex.Tenant == exs[0].Tenant && ex.User == exs[0].User
	}
	var errs []error
	for _, hk := range hooks {
		if err := hk.AfterSaveBatch(ctx, exs, results); err != nil && !(oneUser && errors.Is(err, memory.ErrErased)) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrHook, errors.Join(errs...))
	}
	return nil
}

// guarded returns a copy of results in which each exchange not dropped
// carries, as GuardSince, the earliest At among its user's exchanges in
// exs (now for an exchange without At). The hooks set it on every fact,
// summary and item they write deriving from the exchange, and the stores
// then refuse whatever the hooks write about a user erased at or after the
// exchanges they work on, even when the erasure commits while they run.
func guarded(exs []memory.Exchange, results []memory.SaveResult, now time.Time) []memory.SaveResult {
	type user struct{ tenant, user string }
	since := map[user]time.Time{}
	for i, ex := range exs {
		if results[i].Dropped {
			continue
		}
		at := ex.At
		if at.IsZero() {
			at = now
		}
		u := user{ex.Tenant, ex.User}
		if first, ok := since[u]; !ok || at.Before(first) {
			since[u] = at
		}
	}
	out := make([]memory.SaveResult, len(results))
	for i, ex := range exs {
		out[i] = results[i]
		if !results[i].Dropped {
			out[i].GuardSince = since[user{ex.Tenant, ex.User}]
		}
	}
	return out
}
