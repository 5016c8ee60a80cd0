package enrich

import (
	"context"
	"slices"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// coalesced is a BatchHook that hands its hook one exchange per
// conversation per round.
type coalesced struct{ h record.Hook }

// CoalesceTurns wraps a hook that does per-exchange work worth doing once
// over several turns (fact extraction: one model call over all the new user
// messages): in a batch, the new exchanges of each conversation are merged
// into one, in order — their turns concatenated, the newest reply, id and
// time — and the hook runs once per conversation. Duplicates and dropped
// exchanges are left out, as fact extraction skips them.
func CoalesceTurns(h record.Hook) record.BatchHook { return coalesced{h} }

// AfterSave runs the hook.
func (c coalesced) AfterSave(ctx context.Context, ex memory.Exchange, res memory.SaveResult) error {
	return c.h.AfterSave(ctx, ex, res)
}

// AfterSaveBatch merges the batch per conversation and runs the hook over
// the merged exchanges (in one call when it is a BatchHook).
func (c coalesced) AfterSaveBatch(ctx context.Context, exs []memory.Exchange, results []memory.SaveResult) error {
	var (
		merged []memory.Exchange
		res    []memory.SaveResult
		at     = map[memory.Identity]int{}
	)
	for i, ex := range exs {
		if results[i].Duplicate || results[i].Dropped {
			continue
		}
		k, ok := at[ex.Identity]
		if !ok {
			at[ex.Identity] = len(merged)
			ex.Turn = slices.Clone(ex.Turn)
			merged, res = append(merged, ex), append(res, results[i])
			continue
		}
		m := &merged[k]
		m.Turn = append(m.Turn, ex.Turn...)
		m.ID, m.RequestID, m.Reply, m.At, m.Model, m.Usage = ex.ID, ex.RequestID, ex.Reply, ex.At, ex.Model, ex.Usage
		m.Prior = nil
		res[k].Inserted += results[i].Inserted
		res[k].Superseded += results[i].Superseded
		if g := results[i].GuardSince; res[k].GuardSince.IsZero() || !g.IsZero() && g.Before(res[k].GuardSince) {
			res[k].GuardSince = g // the earliest: what derives from the merged exchange derives from each
		}
	}
	if len(merged) == 0 {
		return nil
	}
	if bh, ok := c.h.(record.BatchHook); ok {
		return bh.AfterSaveBatch(ctx, merged, res)
	}
	for i, ex := range merged {
		if err := c.h.AfterSave(ctx, ex, res[i]); err != nil {
			return err
		}
	}
	return nil
}
