package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/telemetry"
)

// SaveExchange stores an exchange as SaveExchanges stores a batch of one
// (contract.PlanSave).
func (s *Store) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	res, err := s.SaveExchanges(ctx, []memory.Exchange{ex})
	if err != nil {
		return memory.SaveResult{}, err
	}
	return res[0], nil
}

// SaveExchanges stores exchanges in one write transaction (a group
// commit), each by the store contract (storetest.Store), in the order
// given; results[i] is exs[i]'s. Each records its chat's candidate
// (memory.CandidateOf) in the same transaction. An exchange stored under
// its chat's lock (memory.Exchange.Fence) is stored only while that hold
// holds it (fenceChats), else the batch fails with memory.ErrLockLost. It
// is all or nothing: on any error nothing is stored, and the caller saves
// them one by one.
func (s *Store) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	defer telemetry.Span(&ctx, "sqlite.SaveExchanges")()
	if err := contract.ValidExchange(exs...); err != nil {
		return nil, fmt.Errorf("save exchanges: %w", err)
	}
	results := make([]memory.SaveResult, len(exs))
	err := s.inWrite(ctx, func(tx *sql.Tx) error {
		for i, ex := range exs {
			if chat, ok := memory.ChatOf(ex); ok {
				if err := s.fenceChats(ctx, tx, ex.Fence, chat); err != nil {
					return fmt.Errorf("save exchange %s: %w", ex.ID, err)
				}
			}
			res, err := saveExchange(ctx, writeTx{tx, s.writes}, ex)
			if err == nil {
				err = recordCandidate(ctx, tx, ex, res)
			}
			if err != nil {
				return fmt.Errorf("save exchange %s: %w", ex.ID, err)
			}
			results[i] = res
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("save %d exchanges: %w", len(exs), err)
	}
	return results, nil
}

// The statements capture's save runs for every exchange, prepared once on
// the writer (writeTx).
const (
	sqlErasedAt       = `SELECT erased_at FROM user_tombstones WHERE digest = ?`
	sqlDeletedAt      = `SELECT deleted_at FROM conversation_tombstones WHERE user_digest = ? AND digest = ?`
	sqlExchangeStored = `SELECT 1 FROM exchanges WHERE tenant = ? AND user_id = ? AND conversation IN (?, ?) AND id = ?`
	// sqlCountConversation creates the conversation, or moves its live
	// message count and its time.
	sqlCountConversation = `INSERT INTO conversations (tenant, user_id, id, created_at, updated_at, message_count)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, user_id, id) DO UPDATE SET
		message_count = message_count + excluded.message_count, updated_at = MAX(updated_at, excluded.updated_at)`
	// sqlLastSeq also reads the user's Revisions.Tail (SaveResult.TailBefore),
	// the counts of the tombstone ?4 included (ItemRevisions).
	sqlLastSeq = `SELECT COALESCE(MAX(seq), 0), COALESCE((SELECT messages_added + messages_changed
		FROM memory_item_revisions WHERE tenant = ?1 AND user_id = ?2), 0)
		+ COALESCE((SELECT messages_added + messages_changed FROM user_tombstones WHERE digest = ?4), 0)
		FROM messages WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3`
	// sqlInsertMessage inserts one message; sqlInsertMessages (var) inserts
	// messageRows of them.
	sqlInsertMessage  = insertMessageInto + messageRow
	sqlRecordExchange = `INSERT INTO exchanges
		(tenant, user_id, conversation, id, model, prompt_tokens, completion_tokens, at, stored_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

const (
	insertMessageInto = `INSERT INTO messages (tenant, user_id, conversation, seq, key, role, content, raw, tokens, created_at, pos, digest, reply) VALUES `
	messageRow        = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// messageRows is how many messages one statement of a save inserts: a
// history resent whole (tens of thousands of messages) is written in
// statements of this many rows, each parsed once and journaled once,
// instead of one statement per message (about 60 µs each, most of it
// SQLite saving the pages each statement touches for its own rollback).
const messageRows = 64

var sqlInsertMessages = insertMessageInto + list(messageRow, messageRows)

// hotWrites are the write statements a Store prepares when it opens.
var hotWrites = []string{sqlErasedAt, sqlDeletedAt, sqlExchangeStored, sqlCountConversation, sqlLastSeq, sqlInsertMessage,
	sqlInsertMessages, sqlRecordExchange, sqlInsertItem, sqlInsertItems, sqlFactMentioned, sqlMentionFact}

// saveExchange is SaveExchange's body, in the caller's write transaction:
// it reads what contract.PlanSave needs and writes what it plans. When it
// inserts messages and supersedes none, the result carries the user's
// Revisions.Tail read before the inserts (TailBefore): the transaction
// holds the file's one write lock, so nothing else changes the user's
// messages in between.
func saveExchange(ctx context.Context, tx writeTx, ex memory.Exchange) (memory.SaveResult, error) {
	at := cmp.Or(ex.At, time.Now())
	erased, err := erasedAt(ctx, tx, ex.Tenant, ex.User)
	if err != nil {
		return memory.SaveResult{}, err
	}
	// A turn received after an erasure began, while its chunks still
	// delete every row of the user, would be deleted with them: it waits
	// for the erasure's end (a transient error, retried). One received
	// before is dropped (PlanSave).
	if !erased.IsZero() && erased.Before(at) {
		if under, err := erasing(ctx, tx, ex.Tenant, ex.User); err != nil || under {
			return memory.SaveResult{}, cmp.Or(err, errErasing)
		}
	}
	// An exchange stored in the default conversation may since have moved
	// to its candidate conversation (see Adopt).
	var one int
	err = tx.QueryRowContext(ctx, sqlExchangeStored, ex.Tenant, ex.User, ex.Conversation,
		cmp.Or(ex.Candidate, ex.Conversation), ex.ID).Scan(&one)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return memory.SaveResult{}, fmt.Errorf("check exchange: %w", err)
	}
	var conv contract.SaveConv
	if conv.Deleted, err = deletedAt(ctx, tx, ex.Identity); err != nil {
		return memory.SaveResult{}, err
	}
	if n := contract.TailLen(ex); n > 0 {
		tail, err := liveTail(ctx, tx, ex.Identity, n, "")
		if err != nil {
			return memory.SaveResult{}, err
		}
		conv.SetTail(tail, n)
	}
	if conv.NeedsHead(ex) {
		n := contract.HeadLen(ex)
		head, err := liveFrom(ctx, tx, ex.Identity, 0, n)
		if err != nil {
			return memory.SaveResult{}, fmt.Errorf("load live head: %w", err)
		}
		conv.SetHead(head, n)
	}
	var before int64
	if conv.NeedsRewound(ex) {
		if err := readRewound(ctx, tx, ex, &conv); err != nil {
			return memory.SaveResult{}, err
		}
	}
	if err := readEdited(ctx, tx, ex, &conv); err != nil {
		return memory.SaveResult{}, err
	}
	if err := tx.QueryRowContext(ctx, sqlLastSeq, ex.Tenant, ex.User, ex.Conversation, contract.UserTombstone(ex.Tenant, ex.User)).Scan(&conv.LastSeq, &before); err != nil {
		return memory.SaveResult{}, fmt.Errorf("next seq: %w", err)
	}
	p := contract.PlanSave(ex, at, erased, one == 1, &conv)
	res := p.Result
	if res.Inserted == 0 {
		return res, nil
	}
	if _, err := tx.ExecContext(ctx, sqlCountConversation,
		ex.Tenant, ex.User, ex.Conversation, nanos(at), nanos(at), res.Inserted+len(res.Revised)-res.Superseded); err != nil {
		return res, fmt.Errorf("update conversation: %w", err)
	}
	if p.SupersedeFrom > 0 {
		// The replaced branch leaves recall with it: its messages' items
		// go in this transaction, and AddItems refuses them from now on.
		if _, err := tx.ExecContext(ctx, `DELETE FROM memory_items
			WHERE tenant = ? AND user_id = ? AND kind = 'message' AND source IN (
				SELECT key FROM messages
				WHERE tenant = ? AND user_id = ? AND conversation = ? AND seq >= ? AND superseded_at IS NULL)`,
			ex.Tenant, ex.User, ex.Tenant, ex.User, ex.Conversation, p.SupersedeFrom); err != nil {
			return res, fmt.Errorf("drop items of superseded branch: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET superseded_at = ?
			WHERE tenant = ? AND user_id = ? AND conversation = ? AND seq >= ? AND superseded_at IS NULL`,
			nanos(time.Now()), ex.Tenant, ex.User, ex.Conversation, p.SupersedeFrom); err != nil {
			return res, fmt.Errorf("supersede branch: %w", err)
		}
	}
	if err := writeAmends(ctx, tx, ex.Identity, p); err != nil {
		return res, err
	}
	if err := insertMessages(ctx, tx, res.Stored, p.Stamps); err != nil {
		return res, err
	}
	if err := writeRevised(ctx, tx, ex.Identity, p); err != nil {
		return res, err
	}
	if err := retractFacts(ctx, tx.Tx, ex.Identity, p.Unsaid(), p.SupersedeFrom); err != nil {
		return res, err
	}
	if err := dropSummaries(ctx, tx.Tx, ex.Identity, p); err != nil {
		return res, err
	}
	var prompt, completion int
	if ex.Usage != nil {
		prompt, completion = ex.Usage.PromptTokens, ex.Usage.CompletionTokens
	}
	if _, err := tx.ExecContext(ctx, sqlRecordExchange,
		ex.Tenant, ex.User, ex.Conversation, ex.ID, ex.Model, prompt, completion, nanos(at), nanos(time.Now())); err != nil {
		return res, fmt.Errorf("record exchange: %w", err)
	}
	res.TailBefore, res.TailKnown = before, res.Superseded == 0
	return res, nil
}

// readRewound reads, into conv, the live message ex's Rewind names: its
// Stamp and how many live messages its conversation holds from it on
// (contract.SaveConv.SetRewound).
func readRewound(ctx context.Context, tx writeTx, ex memory.Exchange, conv *contract.SaveConv) error {
	var (
		pos    *int64
		digest []byte
		live   int
	)
	err := tx.QueryRowContext(ctx, `SELECT pos, digest, (SELECT COUNT(*) FROM messages
			WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3 AND seq >= ?4 AND superseded_at IS NULL)
		FROM messages WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3 AND seq = ?4 AND superseded_at IS NULL`,
		ex.Tenant, ex.User, ex.Conversation, ex.Rewind.Seq).Scan(&pos, &digest, &live)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read rewound message: %w", err)
	}
	conv.SetRewound(ex.Rewind.Seq, contract.StampOf(pos, digest), live)
	return nil
}

// readEdited reads, into conv, the messages ex's Edits name: their Stamp
// when live, their Amend and when they were said
// (contract.SaveConv.SetEdited).
func readEdited(ctx context.Context, tx writeTx, ex memory.Exchange, conv *contract.SaveConv) error {
	for _, seq := range conv.EditsToRead(ex) {
		var (
			pos           *int64
			digest, amend []byte
			live          bool
		)
		var said int64
		err := tx.QueryRowContext(ctx, `SELECT pos, digest, amend, superseded_at IS NULL, created_at FROM messages
			WHERE tenant = ? AND user_id = ? AND conversation = ? AND seq = ?`,
			ex.Tenant, ex.User, ex.Conversation, seq).Scan(&pos, &digest, &amend, &live, &said)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read edited message: %w", err)
		}
		var st memory.Stamp
		if live {
			st = contract.StampOf(pos, digest)
		}
		var saidAt time.Time
		if said != 0 {
			saidAt = fromNanos(said)
		}
		conv.SetEdited(seq, st, contract.AmendOf(amend), saidAt)
	}
	return nil
}

// writeAmends writes p's Amends (an edited message leaves the live branch
// with its recall items) and, after a Rewind, clears the Amends of the
// messages it superseded.
func writeAmends(ctx context.Context, tx writeTx, id memory.Identity, p contract.SavePlan) error {
	for _, a := range p.Amends {
		if a.Supersede {
			if _, err := tx.ExecContext(ctx, `DELETE FROM memory_items
				WHERE tenant = ? AND user_id = ? AND kind = 'message' AND source IN (
					SELECT key FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ? AND seq = ?)`,
				id.Tenant, id.User, id.Tenant, id.User, id.Conversation, a.Seq); err != nil {
				return fmt.Errorf("drop items of edited message: %w", err)
			}
		}
		if a.Revise {
			// The old text moves out of the way of the new one, which
			// carries the Amend (writeRevised).
			if _, err := tx.ExecContext(ctx, `UPDATE messages SET seq = ?, amend = NULL, superseded_at = ?
				WHERE tenant = ? AND user_id = ? AND conversation = ? AND seq = ?`,
				a.MoveTo, nanos(time.Now()), id.Tenant, id.User, id.Conversation, a.Seq); err != nil {
				return fmt.Errorf("move edited message: %w", err)
			}
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET amend = ?,
				superseded_at = CASE WHEN ? THEN ? ELSE superseded_at END
			WHERE tenant = ? AND user_id = ? AND conversation = ? AND seq = ?`,
			contract.AmendArg(a.Amend), a.Supersede, nanos(time.Now()), id.Tenant, id.User, id.Conversation, a.Seq); err != nil {
			return fmt.Errorf("amend stamps: %w", err)
		}
	}
	if p.ClearAmendsFrom >= 0 {
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET amend = NULL
			WHERE tenant = ? AND user_id = ? AND conversation = ? AND pos >= ? AND amend IS NOT NULL`,
			id.Tenant, id.User, id.Conversation, p.ClearAmendsFrom); err != nil {
			return fmt.Errorf("clear amends: %w", err)
		}
	}
	return nil
}

// writeRevised inserts the new texts of p's edited messages
// (Result.Revised), each where its old text was (writeAmends moved it),
// with its Stamp and its AmendRow's Amend.
func writeRevised(ctx context.Context, tx writeTx, id memory.Identity, p contract.SavePlan) error {
	if len(p.Result.Revised) == 0 {
		return nil
	}
	if err := insertMessages(ctx, tx, p.Result.Revised, p.RevisedStamps); err != nil {
		return err
	}
	for _, a := range p.Amends {
		if !a.Revise {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET amend = ?
			WHERE tenant = ? AND user_id = ? AND conversation = ? AND seq = ?`,
			contract.AmendArg(a.Amend), id.Tenant, id.User, id.Conversation, a.Seq); err != nil {
			return fmt.Errorf("amend edited message: %w", err)
		}
	}
	return nil
}

// stampArgs returns a message's Stamp as its pos and digest columns
// (NULL when unknown).
func stampArgs(st memory.Stamp) (pos, digest any) {
	if !st.Known {
		return nil, nil
	}
	return st.Pos, st.Digest[:]
}

// insertMessages inserts msgs, with their stamps (stamps[i] is msgs[i]'s;
// none when shorter), in order, messageRows at a time (the rest one by
// one), and sets each one's Raw and CreatedAt as stored.
func insertMessages(ctx context.Context, tx writeTx, msgs []memory.Message, stamps []memory.Stamp) error {
	args := make([]any, 0, 13*min(len(msgs), messageRows))
	done := 0
	return contract.RowBatches(msgs, messageRows, func(batch []memory.Message) error {
		args = args[:0]
		for i := range batch {
			m := &batch[i]
			raw, err := contract.MessageJSON(*m)
			if err != nil {
				return err
			}
			var st memory.Stamp
			if k := done + i; k < len(stamps) {
				st = stamps[k]
			}
			pos, digest := stampArgs(st)
			args = append(args, m.Tenant, m.User, m.Conversation, m.Seq, m.Key, m.Role, m.Content, raw, m.Tokens, nanos(m.CreatedAt), pos, digest, contract.ReplyArg(*m))
			m.Raw, m.CreatedAt = []byte(raw), fromNanos(nanos(m.CreatedAt))
		}
		query := sqlInsertMessage
		if len(batch) == messageRows {
			query = sqlInsertMessages
		}
		if _, err := tx.ExecContext(ctx, query, args...); err != nil {
			return fmt.Errorf("insert %d messages from seq %d: %w", len(batch), batch[0].Seq, err)
		}
		done += len(batch)
		return nil
	})
}

// erasedAt returns when the user was last erased, or the zero time when
// never, from the user's tombstone (contract.UserTombstone).
func erasedAt(ctx context.Context, q querier, tenant, user string) (time.Time, error) {
	var at time.Time
	err := q.QueryRowContext(ctx, sqlErasedAt, contract.UserTombstone(tenant, user)).Scan((*nanoTime)(&at))
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, fmt.Errorf("check erasure: %w", err)
	}
	return at, nil
}

// deletedAt returns when conversation id was last deleted, or the zero
// time when never (since its user's erasure), from the conversation's
// tombstone (contract.ConversationTombstone).
func deletedAt(ctx context.Context, q querier, id memory.Identity) (time.Time, error) {
	var at time.Time
	err := q.QueryRowContext(ctx, sqlDeletedAt, contract.UserTombstone(id.Tenant, id.User), contract.ConversationTombstone(id)).Scan((*nanoTime)(&at))
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, fmt.Errorf("check conversation deletion: %w", err)
	}
	return at, nil
}
