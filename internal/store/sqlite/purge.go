package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// purgePage is how many entries Purge reads at a time: payloads can be
// large (a capture holds the client's resent history), so a page is small.
const purgePage = 32

// Purge deletes the entries whose payload match reports true, claimed or
// not, and returns how many it deleted: an erasure purges the erased
// user's entries (record.Queue). It reads the entries there were when it
// began, oldest first, a page at a time on a reader, and deletes each
// page's matches in a write transaction of their own, so the writer is
// never held for the whole scan. A purged entry is never claimed again,
// and its claimer's Ack is a no-op (ids are never reused), so an entry
// being stored when it is purged is not resurrected; nor does it count
// for Queued any more. Leases are left as they are.
//
// The writer deletes with secure_delete, so a purged payload's bytes are
// zeroed in the database file; then, whatever was purged, the WAL, which
// still held the pages as they were, is checkpointed and truncated, as
// after an erasure (truncateWAL): an entry a consumer acknowledged (and
// so deleted) while the scan ran leaves its old page image behind too.
func (o *Outbox) Purge(ctx context.Context, match func(payload []byte) bool) (n int, err error) {
	defer o.s.truncateWAL(ctx)
	var last int64
	if err := o.s.read.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM `+o.table).Scan(&last); err != nil {
		return 0, fmt.Errorf("purge: %w", err)
	}
	for after := int64(0); after < last; {
		var hits []int64
		type entry struct {
			id      int64
			payload []byte
		}
		page, err := queryAll(ctx, o.s.read, func(r rowScanner) (entry, error) {
			var e entry
			return e, r.Scan(&e.id, &e.payload)
		}, `SELECT id, payload FROM `+o.table+` WHERE id > ? AND id <= ? ORDER BY id LIMIT ?`, after, last, purgePage)
		if err != nil {
			return n, fmt.Errorf("purge: %w", err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if match(e.payload) {
				hits = append(hits, e.id)
			}
		}
		after = page[len(page)-1].id
		if len(hits) == 0 {
			continue
		}
		var deleted int64
		err = o.s.inWrite(ctx, func(tx *sql.Tx) error {
			r, err := tx.ExecContext(ctx, `DELETE FROM `+o.table+` WHERE id IN (SELECT value FROM json_each(?))`, jsonArray(hits))
			if err != nil {
				return err
			}
			deleted, err = r.RowsAffected()
			return err
		})
		if err != nil {
			return n, fmt.Errorf("purge: %w", err)
		}
		n += int(deleted)
	}
	return n, nil
}
