package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/telemetry"
)

// StampAt returns the live message of conversation id with the greatest
// position at or below pos among those stored with a Stamp (by a
// full-history client's exchange), with its Stamp; memory.ErrNotFound when
// there is none. One read of the messages_live_pos index.
func (s *Store) StampAt(ctx context.Context, id memory.Identity, pos int) (memory.Stamped, error) {
	defer telemetry.Span(&ctx, "postgres.StampAt")()
	row := s.pool.QueryRow(ctx, `SELECT `+contract.MessageColumns+`, pos, digest FROM messages
		WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND superseded_at IS NULL AND digest IS NOT NULL AND pos <= $4
		ORDER BY pos DESC LIMIT 1`, id.Tenant, id.User, id.Conversation, pos)
	st, err := contract.ScanStamped(row, times{}, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return memory.Stamped{}, memory.ErrNotFound
	case err != nil:
		return memory.Stamped{}, fmt.Errorf("postgres: read message stamp: %w", unavailable(err))
	}
	return st, nil
}

// rewound reads, in the batch's transaction, the live message each
// exchange's Rewind names (contract.SaveConv.SetRewound): one read per
// such exchange, a rare one (a change in a cut history's left-out part).
func (b *saveBatch) rewound(ctx context.Context, conn *pgxpool.Conn, convs map[memory.Identity]*contract.SaveConv) error {
	for _, i := range b.order {
		ex := b.exs[i]
		st := convs[ex.Identity]
		if st == nil || !st.NeedsRewound(ex) {
			continue
		}
		var (
			pos    *int64
			digest []byte
			live   int
		)
		err := conn.QueryRow(ctx, `SELECT pos, digest, (SELECT count(*) FROM messages
				WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND seq >= $4 AND superseded_at IS NULL)
			FROM messages WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND seq = $4 AND superseded_at IS NULL`,
			ex.Tenant, ex.User, ex.Conversation, ex.Rewind.Seq).Scan(&pos, &digest, &live)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read rewound message: %w", unavailable(err))
		}
		st.SetRewound(ex.Rewind.Seq, contract.StampOf(pos, digest), live)
	}
	return nil
}

// edited reads, in the batch's transaction, the messages each exchange's
// Edits name, as contract.SaveConv.SetEdited takes them (their Stamp,
// Amend and when they were said): one read per such message, a
// rare one (an edit in a cut history's left-out part).
func (b *saveBatch) edited(ctx context.Context, conn *pgxpool.Conn, convs map[memory.Identity]*contract.SaveConv) error {
	for _, i := range b.order {
		ex := b.exs[i]
		st := convs[ex.Identity]
		if st == nil {
			continue
		}
		for _, seq := range st.EditsToRead(ex) {
			var (
				pos           *int64
				digest, amend []byte
				live          bool
				said          time.Time
			)
			err := conn.QueryRow(ctx, `SELECT pos, digest, amend, superseded_at IS NULL, created_at FROM messages
				WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND seq = $4`,
				ex.Tenant, ex.User, ex.Conversation, seq).Scan(&pos, &digest, &amend, &live, &said)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("read edited message: %w", unavailable(err))
			}
			var stamp memory.Stamp
			if live {
				stamp = contract.StampOf(pos, digest)
			}
			st.SetEdited(seq, stamp, contract.AmendOf(amend), said)
		}
	}
	return nil
}

// StampAmends returns the Amends the messages of conversation id carry,
// live or not, by position: one read of the messages_amends index (none
// for a chat whose client never edited what its requests leave out).
func (s *Store) StampAmends(ctx context.Context, id memory.Identity) ([]memory.Amend, error) {
	defer telemetry.Span(&ctx, "postgres.StampAmends")()
	rows, err := s.pool.Query(ctx, `SELECT seq, pos, amend FROM messages
		WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND amend IS NOT NULL AND pos IS NOT NULL
		ORDER BY pos, seq`, id.Tenant, id.User, id.Conversation)
	if err != nil {
		return nil, fmt.Errorf("postgres: read stamp amends: %w", unavailable(err))
	}
	defer rows.Close()
	var out []memory.Amend
	for rows.Next() {
		var (
			a     memory.Amend
			pos   int64
			amend []byte
		)
		if err := rows.Scan(&a.Seq, &pos, &amend); err != nil {
			return nil, fmt.Errorf("postgres: read stamp amends: %w", unavailable(err))
		}
		a.Pos, a.Delta = int(pos), contract.AmendOf(amend)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: read stamp amends: %w", unavailable(err))
	}
	return out, nil
}
