package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/telemetry"
)

// SaveExchanges stores exchanges in one transaction (a group commit), each
// by the store contract (storetest.Store); results[i] is exs[i]'s. Each
// records its chat's candidate (memory.CandidateOf) in the same
// transaction. An exchange stored under its chat's lock
// (memory.Exchange.Fence) is stored only while that hold holds it
// (fenceChats), else the batch fails with memory.ErrLockLost. One
// conversation's exchanges are stored in the order given, conversations in
// key order, so concurrent batches lock rows in one order. It is all or
// nothing: on any error nothing is stored and the caller saves them one by
// one.
//
// A batch costs two round trips: one pipeline begins the transaction, takes
// the users' locks, reads their erasures, locks (creating) the
// conversations and reads the duplicates and the live tails to align
// resent history with (contract.PlanSave, here); a second writes every
// message in one statement, moves the conversations' last_seq and commits.
func (s *Store) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	defer telemetry.Span(&ctx, "postgres.SaveExchanges")()
	if err := contract.ValidExchange(exs...); err != nil {
		return nil, fmt.Errorf("postgres: save exchanges: %w", err)
	}
	if len(exs) == 1 && len(exs[0].Prior) == 0 && exs[0].Candidate == "" && exs[0].BranchSeed == "" && exs[0].Rewind == nil {
		// One exchange that only appends (no history to align or compare,
		// no Rewind, no candidate conversation: see Adopt), the common case at low
		// load: one round trip, in one statement.
		res, err := s.saveTurn(ctx, exs[0], cmp.Or(exs[0].At, time.Now()))
		if err != nil {
			return nil, err
		}
		return []memory.SaveResult{res}, nil
	}
	b := newSaveBatch(exs)
	for _, ex := range exs {
		if chat, ok := memory.ChatOf(ex); ok {
			keys, pids, held := s.heldChats(ex.Fence, chat)
			if !held {
				return nil, fmt.Errorf("postgres: save %d exchanges: exchange %s: %w", len(exs), ex.ID, memory.ErrLockLost)
			}
			b.fenceKeys, b.fencePIDs = append(b.fenceKeys, keys...), append(b.fencePIDs, pids...)
			b.fenceIdle = s.fenceIdle()
		}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: save %d exchanges: acquire: %w", len(exs), unavailable(err))
	}
	defer conn.Release()
	results, err := b.run(ctx, conn)
	if err != nil {
		// Leave no transaction open on the connection: a failed pipeline
		// skipped its COMMIT. A connection still in a transaction is closed
		// by the pool on release.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = conn.Exec(rctx, "ROLLBACK")
		cancel()
		// A concurrent save of one of them that won is not permanent: the
		// caller saves them one by one, which reports it as a duplicate.
		return nil, fmt.Errorf("postgres: save %d exchanges: %w", len(exs), permanent(err))
	}
	return results, nil
}

// saveBatch is the state of one SaveExchanges call.
type saveBatch struct {
	exs   []memory.Exchange
	order []int       // indexes of exs, by identity (stable)
	ats   []time.Time // each exchange's time (now when zero)
	// ut and uu are the distinct users, sorted, as parallel columns.
	ut, uu []string
	// convs are the distinct conversations, sorted, and ct, cu and cc the
	// same as parallel columns, with the time of each one's first exchange
	// (cfirst), its latest time (clatest) and how many live messages its
	// alignments need (tailLen; 0: none of its exchanges resent history).
	convs           []memory.Identity
	ct, cu, cc      []string
	cfirst, clatest []time.Time
	// creceived is the latest time each conversation's exchanges were
	// received (memory.Exchange.Received, else their time): a
	// conversation deleted at or after it stores none of them.
	creceived []time.Time
	tailLen   []int32
	// fenceKeys are the chat locks the exchanges of the batch are stored
	// under (memory.Exchange.Fence), fencePIDs their connections'
	// backends: the batch is refused when one of them is lost
	// (fenceChats).
	fenceKeys, fencePIDs []int32
	// fenceIdle bounds how long the transaction may sit idle while it
	// holds their fences (Store.fenceIdle).
	fenceIdle string
}

func newSaveBatch(exs []memory.Exchange) *saveBatch {
	b := &saveBatch{exs: exs, order: make([]int, len(exs)), ats: make([]time.Time, len(exs))}
	now := time.Now()
	for i, ex := range exs {
		b.order[i] = i
		b.ats[i] = cmp.Or(ex.At, now)
	}
	slices.SortStableFunc(b.order, func(i, j int) int {
		x, y := exs[i].Identity, exs[j].Identity
		return cmp.Or(cmp.Compare(x.Tenant, y.Tenant), cmp.Compare(x.User, y.User), cmp.Compare(x.Conversation, y.Conversation))
	})
	for _, i := range b.order {
		id, at := exs[i].Identity, b.ats[i]
		if n := len(b.ut); n == 0 || b.ut[n-1] != id.Tenant || b.uu[n-1] != id.User {
			b.ut, b.uu = append(b.ut, id.Tenant), append(b.uu, id.User)
		}
		if n := len(b.convs); n == 0 || b.convs[n-1] != id {
			b.convs = append(b.convs, id)
			b.ct, b.cu, b.cc = append(b.ct, id.Tenant), append(b.cu, id.User), append(b.cc, id.Conversation)
			b.cfirst, b.clatest, b.tailLen = append(b.cfirst, at), append(b.clatest, at), append(b.tailLen, 0)
			b.creceived = append(b.creceived, time.Time{})
		}
		last := len(b.convs) - 1
		if at.After(b.clatest[last]) {
			b.clatest[last] = at
		}
		r := received(exs[i])
		if r.IsZero() {
			r = undeletable
		}
		if r.After(b.creceived[last]) {
			b.creceived[last] = r
		}
		b.tailLen[last] = max(b.tailLen[last], int32(contract.TailLen(exs[i])))
	}
	return b
}

// run sends the two pipelines on conn and returns the results.
func (b *saveBatch) run(ctx context.Context, conn *pgxpool.Conn) ([]memory.SaveResult, error) {
	erased, deleted, convs, dups, err := b.read(ctx, conn)
	if err != nil {
		return nil, err
	}
	if err := b.heads(ctx, conn, convs); err != nil {
		return nil, err
	}
	if err := b.rewound(ctx, conn, convs); err != nil {
		return nil, err
	}
	if err := b.edited(ctx, conn, convs); err != nil {
		return nil, err
	}
	results := make([]memory.SaveResult, len(b.exs))
	w := &batchWriter{}
	for _, i := range b.order {
		ex, at := b.exs[i], b.ats[i]
		ex.Received = received(ex) // as the upsert compared it
		first := contract.Source{Identity: ex.Identity, Key: memory.Key(ex.ID, 0)}
		moved := first
		moved.Conversation = ex.Candidate
		stored := dups[first] || ex.Candidate != "" && dups[moved]
		st := convs[ex.Identity]
		if st == nil { // its user erased, or it deleted, after all of its exchanges
			st = &contract.SaveConv{}
		}
		st.Deleted = deleted[ex.Identity]
		p := contract.PlanSave(ex, at, erased[contract.User{Tenant: ex.Tenant, User: ex.User}], stored, st)
		if p.Result.Inserted > 0 && convs[ex.Identity] == nil {
			return nil, fmt.Errorf("exchange %s: conversation not locked", ex.ID)
		}
		w.amends(ex.Identity, p, at)
		if p.SupersedeFrom > 0 {
			w.supersede(ex.Identity, p.SupersedeFrom, at)
		}
		w.revised(ex.Identity, p)
		w.retract(ex.Identity, p)
		w.summaries(ex.Identity, p)
		for k, m := range p.Result.Stored {
			w.message(m, p.Stamps[k])
			p.Result.Stored[k] = asStored(m)
		}
		results[i] = p.Result
		if c := memory.CandidateOf(ex, p.Result); c != "" {
			w.candidate(ex, c)
		}
	}
	for _, id := range b.convs {
		if st := convs[id]; st != nil && !st.Latest.IsZero() {
			w.conversation(id, st.LastSeq, st.Latest)
		}
	}
	tails, err := w.send(ctx, conn, b.ut, b.uu)
	if err != nil {
		return nil, err
	}
	// Each user's count moved by what the batch inserted and superseded of
	// theirs, nothing else (see send): the count before each exchange is
	// the one after the batch less the moves from it on.
	for i := len(b.exs) - 1; i >= 0; i-- {
		r, u := &results[i], contract.User{Tenant: b.exs[i].Tenant, User: b.exs[i].User}
		if r.Inserted > 0 {
			tails[u] -= int64(r.Inserted + r.Superseded + 2*len(r.Revised)) // a revised message's row moved, and its amend
			r.TailBefore, r.TailKnown = tails[u], r.Superseded == 0
		}
	}
	return results, nil
}

// undeletable stands, in a conversation's latest received time
// (saveBatch.creceived), for an exchange without one: no deletion drops it.
var undeletable = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// received is when ex was received (memory.Exchange.Received), at
// PostgreSQL's precision; zero when it was not set (no deletion drops it).
func received(ex memory.Exchange) time.Time {
	return ex.Received.Truncate(time.Microsecond)
}

// heads gives each conversation the first live messages its exchanges
// compare their history with (contract.SaveConv.Head): the tail read, when
// it holds every live message, the common case; else, in the batch's
// transaction, one read per conversation that needs them (a history much
// shorter than its conversation: one more round trip).
func (b *saveBatch) heads(ctx context.Context, conn *pgxpool.Conn, convs map[memory.Identity]*contract.SaveConv) error {
	for k, id := range b.convs {
		if st := convs[id]; st != nil && b.tailLen[k] > 0 {
			st.SetTail(st.Tail, int(b.tailLen[k]))
		}
	}
	need := map[memory.Identity]int{}
	for _, i := range b.order {
		ex := b.exs[i]
		if st := convs[ex.Identity]; st != nil && st.NeedsHead(ex) {
			need[ex.Identity] = max(need[ex.Identity], contract.HeadLen(ex))
		}
	}
	for _, id := range b.convs {
		if n := need[id]; n > 0 {
			head, err := liveFrom(ctx, conn, id, 0, n)
			if err != nil {
				return fmt.Errorf("load head: %w", unavailable(err))
			}
			convs[id].SetHead(head, n)
		}
	}
	return nil
}

// read sends the first pipeline: BEGIN, the users' shared locks (in key
// order), their erasures, the conversations' deletions, the
// conversations' upsert (skipping users erased, and conversations deleted,
// after all of their exchanges), the duplicates and the tails.
func (b *saveBatch) read(ctx context.Context, conn *pgxpool.Conn) (map[contract.User]time.Time, map[memory.Identity]time.Time,
	map[memory.Identity]*contract.SaveConv, map[contract.Source]bool, error) {
	var kt, ku, kc, kk []string
	for _, i := range b.order {
		ex := b.exs[i]
		kt, ku, kc, kk = append(kt, ex.Tenant), append(ku, ex.User), append(kc, ex.Conversation), append(kk, memory.Key(ex.ID, 0))
		if ex.Candidate != "" {
			// It may have been stored and moved there since (see Adopt).
			kt, ku, kc, kk = append(kt, ex.Tenant), append(ku, ex.User), append(kc, ex.Candidate), append(kk, memory.Key(ex.ID, 0))
		}
	}
	erased := map[contract.User]time.Time{}
	deleted := map[memory.Identity]time.Time{}
	convs := map[memory.Identity]*contract.SaveConv{}
	dups := map[contract.Source]bool{}
	var (
		u   contract.User
		at  time.Time
		src contract.Source
		seq int64
		m   memory.Message
		raw []byte
	)
	p := &pgx.Batch{}
	p.Queue("BEGIN")
	if len(b.fenceKeys) > 0 {
		// Before any other lock: a new holder of a chat waits for this
		// transaction, once it took its fence, to end (chatFenceClass).
		p.Queue(fenceChatsSQL, chatFenceClass, fenceKeys(b.fenceKeys), b.fenceIdle)
	}
	p.Queue(`SELECT pg_advisory_xact_lock_shared(hashtextextended(t || '/' || u, 3))
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(t, u, o) ORDER BY o`, b.ut, b.uu)
	queueEach(p, "check erasures", []any{&u.Tenant, &u.User, &at}, func() { erased[u] = at },
		`SELECT DISTINCT x.t, x.u, e.erased_at FROM unnest($1::text[], $2::text[]) AS x(t, u)
		JOIN user_tombstones e ON e.digest = memgate_user_tombstone(x.t, x.u)`, b.ut, b.uu)
	queueEach(p, "check deletions", []any{&src.Tenant, &src.User, &src.Conversation, &at}, func() { deleted[src.Identity] = at },
		`SELECT DISTINCT x.t, x.u, x.c, d.deleted_at FROM unnest($1::text[], $2::text[], $3::text[]) AS x(t, u, c)
		JOIN conversation_tombstones d ON d.user_digest = memgate_user_tombstone(x.t, x.u)
			AND d.digest = memgate_conversation_tombstone(x.t, x.u, x.c)`, b.ct, b.cu, b.cc)
	// The upsert locks each conversation row until commit: concurrent saves
	// to it queue here, and each sees the previous one's rows.
	queueEach(p, "lock conversations", []any{&src.Tenant, &src.User, &src.Conversation, &seq},
		func() { convs[src.Identity] = &contract.SaveConv{LastSeq: seq} },
		`INSERT INTO conversations (tenant, user_id, id, created_at, updated_at)
		SELECT x.t, x.u, x.c, x.f, x.f
		FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[])
			WITH ORDINALITY AS x(t, u, c, f, l, r, o)
		WHERE NOT EXISTS (SELECT 1 FROM user_tombstones e WHERE e.digest = memgate_user_tombstone(x.t, x.u) AND e.erased_at >= x.l)
			AND NOT EXISTS (SELECT 1 FROM conversation_tombstones d
				WHERE d.user_digest = memgate_user_tombstone(x.t, x.u) AND d.digest = memgate_conversation_tombstone(x.t, x.u, x.c)
					AND d.deleted_at >= x.r)
		ORDER BY x.o
		ON CONFLICT (tenant, user_id, id) DO UPDATE SET last_seq = conversations.last_seq
		RETURNING tenant, user_id, id, last_seq`, b.ct, b.cu, b.cc, b.cfirst, b.clatest, b.creceived)
	queueEach(p, "check duplicates", []any{&src.Tenant, &src.User, &src.Conversation, &src.Key}, func() { dups[src] = true },
		`SELECT x.t, x.u, x.c, x.k FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS x(t, u, c, k)
		WHERE EXISTS (SELECT 1 FROM messages m WHERE m.tenant = x.t AND m.user_id = x.u AND m.conversation = x.c AND m.key = x.k)`,
		kt, ku, kc, kk)
	var lost int64
	if len(b.fenceKeys) > 0 {
		queueEach(p, "check chat locks", []any{&lost}, func() {}, lostChatsSQL, b.fenceKeys, b.fencePIDs, chatLockClass)
	}
	if slices.ContainsFunc(b.tailLen, func(n int32) bool { return n > 0 }) {
		queueEach(p, "load tails", []any{&m.Tenant, &m.User, &m.Conversation, &m.Seq, &m.Key, &m.Role, &m.Content, &raw, &m.Tokens, &m.CreatedAt},
			func() {
				if st := convs[memory.Identity{Tenant: m.Tenant, User: m.User, Conversation: m.Conversation}]; st != nil {
					msg := m
					if raw != nil {
						msg.Raw = json.RawMessage(slices.Clone(raw))
					}
					st.Tail = append(st.Tail, msg)
				}
			}, `SELECT x.t, x.u, x.c, m.seq, m.key, m.role, m.content, m.raw, m.tokens, m.created_at
			FROM unnest($1::text[], $2::text[], $3::text[], $4::int[]) AS x(t, u, c, n)
			CROSS JOIN LATERAL (
				SELECT seq, key, role, content, raw, tokens, created_at FROM messages
				WHERE tenant = x.t AND user_id = x.u AND conversation = x.c AND superseded_at IS NULL
				ORDER BY seq DESC LIMIT x.n) m
			ORDER BY x.t, x.u, x.c, m.seq`, b.ct, b.cu, b.cc, b.tailLen)
	}
	if err := conn.SendBatch(ctx, p).Close(); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("read: %w", unavailable(err))
	}
	if lost > 0 {
		return nil, nil, nil, nil, memory.ErrLockLost
	}
	return erased, deleted, convs, dups, nil
}

// batchWriter gathers the second pipeline: the messages (written in one
// statement between supersedes), the supersedes, the conversations' new
// last_seq, the candidates recorded, and COMMIT.
type batchWriter struct {
	p pgx.Batch
	// pending messages, as parallel columns.
	t, u, c, k, role, content []string
	raw                       []*string
	seq                       []int64
	tokens                    []int32
	created                   []time.Time
	// pos and digest are each message's Stamp (NULL: none).
	pos    []*int64
	digest [][]byte
	// reply is each message's print, when it is a reply
	// (contract.ReplyArg; NULL: none).
	reply [][]byte
	// conversations, as parallel columns.
	ct, cu, cc []string
	cseq       []int64
	cat        []time.Time
	// candidates recorded (memory.CandidateOf), as parallel columns: an
	// exchange's identity, its candidate and its first message's key.
	dt, du, dc, dd, dk []string
	// added counts the messages queued for each user: the batch moves
	// their messages_added itself (migration 0024), once they are all
	// queued.
	added map[contract.User]int64
}

// message adds m, with its Stamp st, to the messages to insert.
func (w *batchWriter) message(m memory.Message, st memory.Stamp) {
	var raw *string
	if len(m.Raw) > 0 {
		s := string(m.Raw)
		raw = &s
	}
	w.t, w.u, w.c = append(w.t, m.Tenant), append(w.u, m.User), append(w.c, m.Conversation)
	w.seq, w.k, w.role, w.content = append(w.seq, m.Seq), append(w.k, m.Key), append(w.role, m.Role), append(w.content, m.Content)
	w.raw, w.tokens, w.created = append(w.raw, raw), append(w.tokens, int32(m.Tokens)), append(w.created, m.CreatedAt)
	var (
		pos    *int64
		digest []byte
	)
	if st.Known {
		p := int64(st.Pos)
		pos, digest = &p, st.Digest[:]
	}
	w.pos, w.digest = append(w.pos, pos), append(w.digest, digest)
	w.reply = append(w.reply, contract.ReplyArg(m))
}

// candidate records ex, stored in the batch, with its chat's conversation
// candidate (see Adopt), in the batch's transaction.
func (w *batchWriter) candidate(ex memory.Exchange, candidate string) {
	w.dt, w.du, w.dc = append(w.dt, ex.Tenant), append(w.du, ex.User), append(w.dc, ex.Conversation)
	w.dd, w.dk = append(w.dd, candidate), append(w.dk, memory.Key(ex.ID, 0))
}

// flush queues the pending messages' insert. Their users' messages_added
// is moved by send (countAdded), not by messages_rev_insert for each row:
// the first insert is preceded by the setting that tells the trigger so.
func (w *batchWriter) flush() {
	if len(w.t) == 0 {
		return
	}
	if w.added == nil {
		w.added = map[contract.User]int64{}
		w.p.Queue(`SELECT set_config('memgate.messages_counted', 'on', true)`)
	}
	for i := range w.t {
		w.added[contract.User{Tenant: w.t[i], User: w.u[i]}]++
	}
	w.p.Queue(`INSERT INTO messages (tenant, user_id, conversation, seq, key, role, content, raw, tokens, created_at, pos, digest, reply)
		SELECT t, u, c, s, k, r, b, j::json, n, a, o, d, p
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int[], $10::timestamptz[],
			$11::bigint[], $12::bytea[], $13::bytea[])
			AS x(t, u, c, s, k, r, b, j, n, a, o, d, p)`,
		w.t, w.u, w.c, w.seq, w.k, w.role, w.content, w.raw, w.tokens, w.created, w.pos, w.digest, w.reply)
	w.t, w.u, w.c, w.seq, w.k, w.role, w.content, w.raw, w.tokens, w.created = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
	w.pos, w.digest, w.reply = nil, nil, nil
}

// supersede queues, after the messages so far, the supersede of id's live
// messages from seq on (and the deletion of their memory items).
func (w *batchWriter) supersede(id memory.Identity, from int64, at time.Time) {
	w.flush()
	// The replaced branch leaves recall with it: its messages' items are
	// deleted in this transaction. AddItems takes a share lock on the
	// conversation row (which this transaction holds exclusively since the
	// upsert) before it checks that a message is live, so a late index
	// either commits before this delete sees its rows or sees the messages
	// superseded and skips them.
	w.p.Queue(supersedeSQL, id.Tenant, id.User, id.Conversation, from, at)
}

// amends queues, after the messages so far, p's Amends (an edited
// message leaves the live branch with its recall items, at at) and, after
// a Rewind, the clearing of the Amends of the messages it supersedes.
func (w *batchWriter) amends(id memory.Identity, p contract.SavePlan, at time.Time) {
	if len(p.Amends) == 0 && p.ClearAmendsFrom < 0 {
		return
	}
	w.flush()
	for _, a := range p.Amends {
		if a.Revise {
			// The old text moves out of the way of the new one, which
			// carries the Amend (revised); its items go.
			w.p.Queue(`WITH edited AS (
					UPDATE messages SET seq = $5, amend = NULL, superseded_at = $6
					WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND seq = $4
					RETURNING key
				)
				DELETE FROM memory_items
				WHERE tenant = $1 AND user_id = $2 AND kind = 'message' AND source IN (SELECT key FROM edited)`,
				id.Tenant, id.User, id.Conversation, a.Seq, a.MoveTo, at)
			continue
		}
		w.p.Queue(`WITH edited AS (
				UPDATE messages SET amend = $5, superseded_at = CASE WHEN $6 THEN $7 ELSE superseded_at END
				WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND seq = $4
				RETURNING key
			)
			DELETE FROM memory_items
			WHERE $6 AND tenant = $1 AND user_id = $2 AND kind = 'message' AND source IN (SELECT key FROM edited)`,
			id.Tenant, id.User, id.Conversation, a.Seq, contract.AmendArg(a.Amend), a.Supersede, at)
	}
	if p.ClearAmendsFrom >= 0 {
		w.p.Queue(`UPDATE messages SET amend = NULL
			WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND pos >= $4 AND amend IS NOT NULL`,
			id.Tenant, id.User, id.Conversation, p.ClearAmendsFrom)
	}
}

// revised queues, after the amends, the insert of the new texts of p's
// edited messages (Result.Revised), each where its old text was, with its
// Stamp and its AmendRow's Amend.
func (w *batchWriter) revised(id memory.Identity, p contract.SavePlan) {
	if len(p.Result.Revised) == 0 {
		return
	}
	for k, m := range p.Result.Revised {
		w.message(m, p.RevisedStamps[k])
		p.Result.Revised[k] = asStored(m)
	}
	w.flush()
	for _, a := range p.Amends {
		if a.Revise {
			w.p.Queue(`UPDATE messages SET amend = $5
				WHERE tenant = $1 AND user_id = $2 AND conversation = $3 AND seq = $4`,
				id.Tenant, id.User, id.Conversation, a.Seq, contract.AmendArg(a.Amend))
		}
	}
}

// retract queues, after the amends and the new texts, the retraction of
// the facts only the texts p's Amends, or its supersession from
// SupersedeFrom, took off the live branch stated (retractFactsSQL), in the
// same pipeline (no round trip of its own), under the user's fact lock, as
// UpsertFact takes it: a fact of the old text written before the lock is
// granted is retracted, one after it finds its message superseded
// (contract.CheckLate).
func (w *batchWriter) retract(id memory.Identity, p contract.SavePlan) {
	seqs := p.Unsaid()
	if len(seqs) == 0 && p.SupersedeFrom <= 0 {
		return
	}
	w.flush()
	w.p.Queue(factLockSQL, id.Tenant, id.User)
	w.p.Queue(retractFactsSQL, id.Tenant, id.User, id.Conversation, seqs, p.SupersedeFrom)
}

func (w *batchWriter) conversation(id memory.Identity, lastSeq int64, at time.Time) {
	w.ct, w.cu, w.cc = append(w.ct, id.Tenant), append(w.cu, id.User), append(w.cc, id.Conversation)
	w.cseq, w.cat = append(w.cseq, lastSeq), append(w.cat, at)
}

// send queues the rest and COMMIT, sends the pipeline and returns the
// users' Revisions.Tail as the batch leaves them. The counters move in
// deferred triggers, fired here just before the commit (SET CONSTRAINTS
// ALL IMMEDIATE) in the order the commit would, right after the batch's
// own move of messages_added (countAdded): the users' rows of
// memory_item_revisions are locked from then on, so no other writer moves
// a count between that read and the commit.
func (w *batchWriter) send(ctx context.Context, conn *pgxpool.Conn, ut, uu []string) (map[contract.User]int64, error) {
	w.flush()
	if len(w.ct) > 0 {
		w.p.Queue(`UPDATE conversations AS v SET last_seq = x.s, updated_at = GREATEST(v.updated_at, x.a)
			FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[]) AS x(t, u, c, s, a)
			WHERE v.tenant = x.t AND v.user_id = x.u AND v.id = x.c`, w.ct, w.cu, w.cc, w.cseq, w.cat)
	}
	if len(w.dt) > 0 {
		// After the messages: the candidate names the first one stored.
		w.p.Queue(`INSERT INTO conversation_candidates (tenant, user_id, conversation, candidate, first_key, at)
			SELECT m.tenant, m.user_id, m.conversation, x.d, m.key, now()
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS x(t, u, c, d, k)
			JOIN messages m ON m.tenant = x.t AND m.user_id = x.u AND m.conversation = x.c AND m.key = x.k
			ON CONFLICT DO NOTHING`, w.dt, w.du, w.dc, w.dd, w.dk)
	}
	w.countAdded(ut, uu)
	w.p.Queue("SET CONSTRAINTS ALL IMMEDIATE")
	tails := map[contract.User]int64{}
	var u contract.User
	var n int64
	// The counts the user's tombstone carries are part of them (ItemRevisions).
	queueEach(&w.p, "read revisions", []any{&u.Tenant, &u.User, &n}, func() { tails[u] = n },
		`SELECT r.tenant, r.user_id, r.messages_added + r.messages_changed
			+ coalesce((SELECT t.messages_added + t.messages_changed FROM user_tombstones t
				WHERE t.digest = memgate_user_tombstone(r.tenant, r.user_id)), 0)
		FROM memory_item_revisions r
		WHERE (r.tenant, r.user_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`, ut, uu)
	w.p.Queue("COMMIT")
	if err := conn.SendBatch(ctx, &w.p).Close(); err != nil {
		return nil, fmt.Errorf("write messages: %w", unavailable(err))
	}
	return tails, nil
}

// countAdded queues the move of each user's messages_added by the
// messages the batch inserted for them (see flush), one row per user of
// ut and uu (the batch's users, in key order) it inserted for, just before
// the deferred triggers fire (see send): the users' rows are locked from
// then on, as the triggers would lock them, and in one order for every
// batch.
func (w *batchWriter) countAdded(ut, uu []string) {
	if len(w.added) == 0 {
		return
	}
	ns := make([]int64, len(ut))
	for k := range ut {
		ns[k] = w.added[contract.User{Tenant: ut[k], User: uu[k]}]
	}
	w.p.Queue(`INSERT INTO memory_item_revisions AS r (tenant, user_id, messages_added)
		SELECT t, u, n FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS x(t, u, n, o) WHERE n > 0 ORDER BY o
		ON CONFLICT (tenant, user_id) DO UPDATE SET messages_added = r.messages_added + EXCLUDED.messages_added`, ut, uu, ns)
}

// eachRow calls fn for each row of rows, the result of a query that failed
// with err or not, scanned into dest; a failure is wrapped as what.
func eachRow(rows pgx.Rows, err error, what string, dest []any, fn func()) error {
	if err == nil {
		_, err = pgx.ForEachRow(rows, dest, func() error { fn(); return nil })
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, unavailable(err))
	}
	return nil
}

// queueEach queues sql on p, and calls fn for each of its rows scanned into
// dest when the batch is read (eachRow).
func queueEach(p *pgx.Batch, what string, dest []any, fn func(), sql string, args ...any) {
	p.Queue(sql, args...).Query(func(rows pgx.Rows) error { return eachRow(rows, nil, what, dest, fn) })
}
