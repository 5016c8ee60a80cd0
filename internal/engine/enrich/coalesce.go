package enrich

import (
	"context"
	"slices"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// coalesced is a Hook that hands its hook one exchange per conversation
// per round.
type coalesced struct{ h record.Hook }

// CoalesceTurns wraps a hook that does per-exchange work worth doing once
// over several turns (fact extraction: one model call over all the new user
// messages): in a batch, the new exchanges of each conversation are merged
// into one, in order — their turns and stored messages concatenated, the
// newest reply, id and time — and the hook runs once over the merged exchanges, one per
// conversation. Duplicates and dropped exchanges are left out, as fact
// extraction skips them.
func CoalesceTurns(h record.Hook) record.Hook { return coalesced{h} }

// AfterSaveBatch merges the batch per conversation and runs the hook over
// the merged exchanges.
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
		res[k].Stored = append(slices.Clip(res[k].Stored), results[i].Stored...)
		res[k].Revised = append(slices.Clip(res[k].Revised), results[i].Revised...)
		res[k].Superseded += results[i].Superseded
		if g := results[i].GuardSince; res[k].GuardSince.IsZero() || !g.IsZero() && g.Before(res[k].GuardSince) {
			res[k].GuardSince = g // the earliest: what derives from the merged exchange derives from each
		}
	}
	if len(merged) == 0 {
		return nil
	}
	return c.h.AfterSaveBatch(ctx, merged, res)
}
