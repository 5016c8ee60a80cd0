package contract

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Row is a row a store reads: a *sql.Row or *sql.Rows, a pgx.Row or
// pgx.Rows.
type Row interface{ Scan(dest ...any) error }

// Times is how a store's driver scans its stored times: Dest is the scan
// destination that fills t, NullDest the one that fills *t, nil for NULL.
type Times interface {
	Dest(t *time.Time) any
	NullDest(t **time.Time) any
}

// MessageColumns are the columns of messages ScanMessage reads, in order.
const MessageColumns = `seq, key, role, content, raw, tokens, created_at`

// ScanMessage reads a message of conversation id from a row of
// MessageColumns, then into extra the columns after them.
func ScanMessage(r Row, times Times, id memory.Identity, extra ...any) (memory.Message, error) {
	m := memory.Message{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation}
	var raw []byte
	err := r.Scan(append([]any{&m.Seq, &m.Key, &m.Role, &m.Content, &raw, &m.Tokens, times.Dest(&m.CreatedAt)}, extra...)...)
	if raw != nil {
		m.Raw = json.RawMessage(raw)
	}
	return m, err
}

// ScanStamped reads a message of conversation id stored with a Stamp from
// a row of MessageColumns, pos and digest. A row's own error is returned
// as it is (the caller's to tell no row); a stamp of NULL columns or a
// digest not a memory.Digest's size is an error.
func ScanStamped(r Row, times Times, id memory.Identity) (memory.Stamped, error) {
	var (
		pos    *int64
		digest []byte
	)
	m, err := ScanMessage(r, times, id, &pos, &digest)
	if err != nil {
		return memory.Stamped{}, err
	}
	st := StampOf(pos, digest)
	if !st.Known {
		return memory.Stamped{}, fmt.Errorf("digest of %d bytes", len(digest))
	}
	return memory.Stamped{Message: m, Stamp: st}, nil
}

// SummaryColumns are the columns of summaries ScanSummary reads, in order.
const SummaryColumns = `version, from_seq, to_seq, content, key_events, preserved, tokens, covered_tokens, created_at, model`

// ScanSummary reads a summary of conversation id from a row of
// SummaryColumns.
func ScanSummary(r Row, times Times, id memory.Identity) (memory.Summary, error) {
	sum := memory.Summary{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation}
	var keyEvents, preserved []byte
	if err := r.Scan(&sum.Version, &sum.FromSeq, &sum.ToSeq, &sum.Text, &keyEvents, &preserved, &sum.Tokens,
		&sum.CoveredTokens, times.Dest(&sum.CreatedAt), &sum.Summariser); err != nil {
		return memory.Summary{}, err
	}
	return sum, ReadSummaryLists(&sum, keyEvents, preserved)
}

// ScanFact reads a fact of (tenant, user) from a row of id, type, key,
// value, confidence, mentions, pinned, the conversation ("" for none),
// created_at, updated_at, superseded_at, expires_at, pin_rule and
// source_message: a store names its columns so.
func ScanFact(r Row, times Times, tenant, user string) (memory.Fact, error) {
	f := memory.Fact{Tenant: tenant, User: user}
	var typ string
	if err := r.Scan(&f.ID, &typ, &f.Key, &f.Value, &f.Confidence, &f.Mentions, &f.Pinned, &f.Conversation,
		times.Dest(&f.CreatedAt), times.Dest(&f.UpdatedAt), times.NullDest(&f.SupersededAt), times.NullDest(&f.ExpiresAt),
		&f.Rule, &f.Source); err != nil {
		return memory.Fact{}, err
	}
	f.Type = memory.FactType(typ)
	return f, nil
}
