package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// pollInterval is how often a blocked Claim looks again for entries that
// went stale or were enqueued by another process; an Enqueue in this process
// wakes it at once.
const pollInterval = 200 * time.Millisecond

// Outbox is a durable queue of the embedded mode: a table in the store's
// database, shared by every process that opens the file and drained by
// their workers (one at a time once leased: see Lease). The store has two:
// the capture outbox (captures waiting to be stored, (*Store).Outbox) and
// the enrichment outbox (stored exchanges waiting for extraction,
// summaries and indexing, (*Store).EnrichOutbox). It is safe for
// concurrent use.
type Outbox struct {
	s     *Store
	table string // outbox or enrich_outbox; never user input
	// drainYields makes the consumer's transactions (claims and
	// acknowledgements) background writes (inWriteAs): set for the
	// enrichment outbox, whose consumer no client waits on. Enqueues, made
	// on the way of a request, never yield.
	drainYields bool

	mu   sync.Mutex
	wake chan struct{} // closed and replaced by every Enqueue
}

func newOutbox(s *Store, table string, drainYields bool) *Outbox {
	return &Outbox{s: s, table: table, drainYields: drainYields, wake: make(chan struct{})}
}

// Enqueue durably appends a payload and wakes Claims blocked in this process.
func (o *Outbox) Enqueue(ctx context.Context, payload []byte) error {
	return o.EnqueueBatch(ctx, [][]byte{payload})
}

// EnqueueBatch durably appends payloads, in order, in one transaction, and
// wakes Claims blocked in this process.
func (o *Outbox) EnqueueBatch(ctx context.Context, payloads [][]byte) error {
	return o.enqueue(ctx, nil, payloads)
}

// EnqueueTurn durably appends payload, a turn of conversation conv, and
// wakes Claims blocked in this process. Until its entry is acknowledged,
// Queued reports conv as queued, to every process that opened the
// database: a gateway then sends conv's next turn after it, not ahead of
// it.
func (o *Outbox) EnqueueTurn(ctx context.Context, conv string, payload []byte) error {
	if conv == "" {
		return fmt.Errorf("enqueue: %w: empty conversation", memory.ErrInvalid)
	}
	return o.enqueue(ctx, &conv, [][]byte{payload})
}

// Queued reports, for each of convs, whether the outbox holds entries
// queued for it by EnqueueTurn (claimed or not), in one read.
func (o *Outbox) Queued(ctx context.Context, convs ...string) ([]bool, error) {
	out := make([]bool, len(convs))
	if len(convs) == 0 {
		return out, nil
	}
	got, err := queryAll(ctx, o.s.reads, func(r rowScanner) (string, error) {
		var c string
		return c, r.Scan(&c)
	}, `SELECT DISTINCT conv FROM `+o.table+` WHERE conv IN (SELECT value FROM json_each(?))`, jsonArray(convs))
	if err != nil {
		return nil, fmt.Errorf("queued: %w", err)
	}
	for i, c := range convs {
		out[i] = slices.Contains(got, c)
	}
	return out, nil
}

// enqueue appends payloads, in order, in one transaction, each for
// conversation conv (nil: none), and wakes Claims blocked in this process.
func (o *Outbox) enqueue(ctx context.Context, conv *string, payloads [][]byte) error {
	if len(payloads) == 0 {
		return nil
	}
	err := o.s.inWrite(ctx, func(tx *sql.Tx) error {
		now := nanos(time.Now())
		for _, p := range payloads {
			if p == nil {
				p = []byte{}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO `+o.table+` (payload, enqueued_at, conv) VALUES (?, ?, ?)`, p, now, conv); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	o.mu.Lock()
	close(o.wake)
	o.wake = make(chan struct{})
	o.mu.Unlock()
	return nil
}

// Claim returns up to max deliveries for consumer, oldest first: entries that
// were claimed (by any consumer) more than staleAfter ago and not
// acknowledged, then unclaimed ones. Each delivery counts one more attempt.
// When there are none it waits up to block for some, returning early on an
// Enqueue in this process and checking again every 200 ms otherwise; it
// returns no deliveries and no error when block passes. It fails with
// memory.ErrInvalid for max < 1 or an empty consumer.
func (o *Outbox) Claim(ctx context.Context, consumer string, max int, staleAfter, block time.Duration) ([]memory.Delivery, error) {
	if max < 1 || consumer == "" {
		return nil, fmt.Errorf("claim: %w: max %d, consumer %q", memory.ErrInvalid, max, consumer)
	}
	deadline := time.Now().Add(block)
	for {
		o.mu.Lock()
		wake := o.wake // closed by the next Enqueue
		o.mu.Unlock()
		ds, err := o.claimOnce(ctx, consumer, max, staleAfter)
		if err != nil || len(ds) > 0 {
			return ds, err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("claim: %w", ctx.Err())
		case <-wake:
		case <-time.After(min(remaining, pollInterval)):
		}
	}
}

// claimOnce claims what is available now, in one write transaction:
// stale entries first, then unclaimed ones, each oldest first. Once the
// outbox has been leased (Lease), only the holder of a live lease claims,
// checked in the same transaction, so a process whose lease ran out claims
// nothing more; and the entries another consumer claimed are stale at once
// for it, since their claimer lost the lease.
func (o *Outbox) claimOnce(ctx context.Context, consumer string, max int, staleAfter time.Duration) ([]memory.Delivery, error) {
	var ds []memory.Delivery
	err := o.s.inWriteAs(ctx, o.drainYields, func(tx *sql.Tx) error {
		now := time.Now()
		holder, live, err := o.leaseHolder(ctx, tx, now)
		if err != nil {
			return err
		}
		others := "" // entries of other consumers: stale after staleAfter
		if holder != "" {
			if holder != consumer || !live {
				return nil
			}
			others = ` OR claimed_by IS NOT ?`
		}
		args := []any{nanos(now.Add(-staleAfter))}
		if others != "" {
			args = append(args, consumer)
		}
		var ids []int64
		ds, err = queryAll(ctx, tx, func(r rowScanner) (memory.Delivery, error) {
			var d memory.Delivery
			var id int64
			err := r.Scan(&id, &d.Payload, &d.Attempts)
			d.ID, d.Attempts, ids = strconv.FormatInt(id, 10), d.Attempts+1, append(ids, id)
			return d, err
		}, `SELECT id, payload, attempts FROM `+o.table+` WHERE claimed_at IS NULL OR claimed_at <= ?`+others+`
			ORDER BY claimed_at IS NULL, id LIMIT ?`, append(args, max)...)
		if err != nil || len(ds) == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE `+o.table+` SET claimed_by = ?, claimed_at = ?, attempts = attempts + 1
			WHERE id IN (SELECT value FROM json_each(?))`, consumer, nanos(now), jsonArray(ids))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	return ds, nil
}

// Ack removes delivered entries for good. Unknown ids are ignored; ids that
// are not outbox ids fail with memory.ErrInvalid and nothing is removed.
func (o *Outbox) Ack(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	nums := make([]int64, len(ids))
	for i, id := range ids {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return fmt.Errorf("ack: %w: id %q", memory.ErrInvalid, id)
		}
		nums[i] = n
	}
	err := o.s.inWriteAs(ctx, o.drainYields, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM `+o.table+` WHERE id IN (SELECT value FROM json_each(?))`, jsonArray(nums))
		return err
	})
	if err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}

// Oldest returns when the oldest entry enqueued or claimed but not
// acknowledged was enqueued (the zero time: none).
func (o *Outbox) Oldest(ctx context.Context) (time.Time, error) {
	var at sql.NullInt64
	if err := o.s.read.QueryRowContext(ctx, `SELECT MIN(enqueued_at) FROM `+o.table).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("oldest: %w", err)
	}
	if !at.Valid {
		return time.Time{}, nil
	}
	return time.Unix(0, at.Int64), nil
}

// Pending reports how many entries are enqueued or claimed but not acknowledged.
func (o *Outbox) Pending(ctx context.Context) (int64, error) {
	var n int64
	if err := o.s.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+o.table).Scan(&n); err != nil {
		return 0, fmt.Errorf("pending: %w", err)
	}
	return n, nil
}
