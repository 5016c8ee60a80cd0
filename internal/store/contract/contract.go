// Package contract holds the part of the memory-store contract that is not
// SQL, stated once for every store: what a valid exchange, item, fact and
// summary is; how a save stores an exchange (PlanSave: dropped, duplicate,
// aligned, superseded, numbered); where AddItems writes an item or why it
// leaves it out (ItemChecks); which first turns Adopt moves (Adopt,
// Continued); when two statements of a fact say the same thing; how a
// summary's lists and a message's JSON are encoded; how a row reads into a
// message, summary or fact (ScanMessage, ScanSummary, ScanFact); how
// superseded messages group into branches; and how the embedded migrations
// are read.
//
// The SQL stores (internal/store/sqlite, internal/store/postgres) import it
// and keep only their SQL; storetest checks the behaviour it gives them. It
// imports internal/memory alone, so a store importing it never reaches the
// store's consumers (prompt, recall, record, enrich, proxy). It lives under
// internal/store, not internal/engine, because its rules are the adapters'
// side of the contract: the engine calls the stores, the stores call this.
package contract

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// ValidIdentity checks the ids of a conversation: memory.ErrInvalid names
// the first bad one.
func ValidIdentity(id memory.Identity) error {
	for _, f := range []struct{ name, v string }{
		{"tenant", id.Tenant}, {"user", id.User}, {"conversation", id.Conversation},
	} {
		if !memory.ValidID(f.v) {
			return fmt.Errorf("%w: %s id %q", memory.ErrInvalid, f.name, f.v)
		}
	}
	return nil
}

// ValidExchange checks what a save relies on, in each of exs: the
// identity, an exchange id, and a role on every message (prior, turn and
// reply).
func ValidExchange(exs ...memory.Exchange) error {
	for _, ex := range exs {
		if err := ValidIdentity(ex.Identity); err != nil {
			return fmt.Errorf("exchange %s: %w", ex.ID, err)
		}
		if ex.ID == "" {
			return fmt.Errorf("%w: exchange has no id", memory.ErrInvalid)
		}
		if ex.Reply.Role == "" {
			return fmt.Errorf("%w: exchange %s has no reply", memory.ErrInvalid, ex.ID)
		}
		for _, group := range [][]memory.Message{ex.Prior, ex.Turn} {
			for _, m := range group {
				if m.Role == "" {
					return fmt.Errorf("%w: exchange %s has a message without a role", memory.ErrInvalid, ex.ID)
				}
			}
		}
	}
	return nil
}

// ValidItem checks what AddItems stores, in each of items: the ids, one of
// the recallable kinds, a ref and a chunk, and an embedding that agrees
// with its model and dims (ValidEmbedding).
func ValidItem(items ...memory.Item) error {
	for _, it := range items {
		switch {
		case !memory.ValidID(it.Tenant) || !memory.ValidID(it.User):
			return fmt.Errorf("%w: item tenant %q user %q", memory.ErrInvalid, it.Tenant, it.User)
		case it.Conversation != "" && !memory.ValidID(it.Conversation):
			return fmt.Errorf("%w: item conversation %q", memory.ErrInvalid, it.Conversation)
		case it.Kind != "message" && it.Kind != "summary" && it.Kind != "fact":
			return fmt.Errorf("%w: item kind %q", memory.ErrInvalid, it.Kind)
		case it.Ref == "" || it.Chunk < 0:
			return fmt.Errorf("%w: item ref %q chunk %d", memory.ErrInvalid, it.Ref, it.Chunk)
		}
		if err := ValidEmbedding(it, false); err != nil {
			return err
		}
	}
	return nil
}

// ValidEmbedding checks that an item's vector, model and dims agree: a
// vector needs a model, and Dims, when set, is its length. With required,
// an item without a vector is invalid too (EmbedItems).
func ValidEmbedding(it memory.Item, required bool) error {
	if it.Embedding == nil {
		if required {
			return fmt.Errorf("%w: item %d has no vector", memory.ErrInvalid, it.ID)
		}
		return nil
	}
	if it.Model == "" || (it.Dims != 0 && it.Dims != len(it.Embedding)) || len(it.Embedding) == 0 {
		return fmt.Errorf("%w: item %d embedding of %d dims says model %q dims %d",
			memory.ErrInvalid, it.ID, len(it.Embedding), it.Model, it.Dims)
	}
	return nil
}

// ItemTimes are the times AddItems stores for it: created, its CreatedAt
// (now when zero), and said, its SaidAt, else its CreatedAt; said is nil
// when it brings neither (the stored time is then kept, or reads as the
// item's creation).
func ItemTimes(it memory.Item, now time.Time) (created time.Time, said *time.Time) {
	created = it.CreatedAt
	if created.IsZero() {
		created = now
	}
	switch {
	case !it.SaidAt.IsZero():
		return created, &it.SaidAt
	case !it.CreatedAt.IsZero():
		return created, &it.CreatedAt
	}
	return created, nil
}

// FactKey normalises a fact key: lower-case, runs of whitespace collapsed
// to one space, trimmed. Keys equal after normalisation name the same fact.
func FactKey(key string) string {
	return strings.Join(strings.Fields(strings.ToLower(key)), " ")
}

// SameFactValue reports whether two statements of a fact say the same
// thing: equal up to case and whitespace.
func SameFactValue(a, b string) bool { return FactKey(a) == FactKey(b) }

// RestatedConfidence is a fact's confidence once restated with the same
// value at confidence c: the larger of both plus 0.1, at most 1.
func RestatedConfidence(old, c float64) float64 { return min(1, max(old, c)+0.1) }

// ValidFact checks what UpsertFact stores and returns f as stored: its
// Confidence clamped to [0, 1], Mentions at least 1, UpdatedAt now when
// zero and CreatedAt UpdatedAt when zero. A bad id or type, an empty key or
// value, or a confidence that is not a number is memory.ErrInvalid.
func ValidFact(f memory.Fact, now time.Time) (memory.Fact, error) {
	switch {
	case !memory.ValidID(f.Tenant) || !memory.ValidID(f.User):
		return f, fmt.Errorf("%w: fact tenant %q user %q", memory.ErrInvalid, f.Tenant, f.User)
	case !f.Type.Valid():
		return f, fmt.Errorf("%w: fact type %q", memory.ErrInvalid, f.Type)
	case FactKey(f.Key) == "" || strings.TrimSpace(f.Value) == "":
		return f, fmt.Errorf("%w: empty fact key or value", memory.ErrInvalid)
	case math.IsNaN(f.Confidence):
		return f, fmt.Errorf("%w: fact confidence is not a number", memory.ErrInvalid)
	}
	if f.UpdatedAt.IsZero() {
		f.UpdatedAt = now
	}
	if f.CreatedAt.IsZero() {
		f.CreatedAt = f.UpdatedAt
	}
	f.Confidence = min(1, max(0, f.Confidence))
	f.Mentions = max(1, f.Mentions)
	return f, nil
}

// StatedEarlier reports whether f, a statement about the user, states
// another value than cur, their current fact of its type and key, and was
// made before cur was last stated: a backlog enriched out of order (two
// workers), history imported or dated in the past. It does not supersede
// cur (UpsertFact leaves cur current and returns it), so the user's facts
// are the latest they stated, whatever order the statements are recorded in.
func StatedEarlier(f, cur memory.Fact) bool {
	return !SameFactValue(cur.Value, f.Value) && f.UpdatedAt.Before(cur.UpdatedAt)
}

// FactRef is the Ref of the recall items made from fact id.
func FactRef(id int64) string { return strconv.FormatInt(id, 10) }

// ValidSummary checks a summary before it is saved and returns it as
// stored, CreatedAt now when zero, with its lists encoded (SummaryLists):
// its identity (bad ids are memory.ErrInvalid), a version of at least 1
// (else memory.ErrConflict: no version below 1 is ever next) and FromSeq
// <= ToSeq (memory.ErrInvalid).
func ValidSummary(s memory.Summary, now time.Time) (_ memory.Summary, keyEvents, preserved []byte, err error) {
	if err := ValidIdentity(memory.Identity{Tenant: s.Tenant, User: s.User, Conversation: s.Conversation}); err != nil {
		return s, nil, nil, err
	}
	if s.Version < 1 {
		return s, nil, nil, fmt.Errorf("summary version %d: %w", s.Version, memory.ErrConflict)
	}
	if s.FromSeq > s.ToSeq {
		return s, nil, nil, fmt.Errorf("%w: summary covers %d..%d", memory.ErrInvalid, s.FromSeq, s.ToSeq)
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = now
	}
	keyEvents, preserved, err = SummaryLists(s)
	return s, keyEvents, preserved, err
}

// SummaryLists encodes a summary's key events and preserved lists as
// stored: JSON, a missing list as [].
func SummaryLists(s memory.Summary) (keyEvents, preserved []byte, err error) {
	keyEvents, err = json.Marshal(nonNil(s.KeyEvents))
	if err != nil {
		return nil, nil, fmt.Errorf("encode key events: %w", err)
	}
	preserved, err = json.Marshal(memory.Preserved{
		Numbers:   nonNil(s.Preserved.Numbers),
		Dates:     nonNil(s.Preserved.Dates),
		Decisions: nonNil(s.Preserved.Decisions),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("encode preserved: %w", err)
	}
	return keyEvents, preserved, nil
}

// ReadSummaryLists decodes what SummaryLists encoded into s.
func ReadSummaryLists(s *memory.Summary, keyEvents, preserved []byte) error {
	if err := json.Unmarshal(keyEvents, &s.KeyEvents); err != nil {
		return fmt.Errorf("decode key events: %w", err)
	}
	if err := json.Unmarshal(preserved, &s.Preserved); err != nil {
		return fmt.Errorf("decode preserved: %w", err)
	}
	return nil
}

// nonNil returns ss, or an empty slice for nil, so it encodes as [].
func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// MessageJSON is the message's verbatim JSON, or a minimal chat message
// built from its role and content when Raw is empty. A Raw that is not JSON
// is memory.ErrInvalid.
func MessageJSON(m memory.Message) (string, error) {
	if len(m.Raw) == 0 {
		b, err := json.Marshal(struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}{m.Role, m.Content})
		if err != nil {
			return "", fmt.Errorf("encode message: %w", err)
		}
		return string(b), nil
	}
	if !json.Valid(m.Raw) {
		return "", fmt.Errorf("%w: message raw is not JSON", memory.ErrInvalid)
	}
	return string(m.Raw), nil
}

// Branches groups a conversation's superseded messages, read newest first
// (by superseded_at, then seq, descending; ats[i] the time msgs[i] was
// superseded), into branches oldest first, each message in Seq order: the
// messages leaving the live branch at one moment are one branch. None: an
// empty slice.
func Branches(msgs []memory.Message, ats []time.Time) []memory.Branch {
	bs := []memory.Branch{}
	for i := len(msgs) - 1; i >= 0; i-- {
		if len(bs) == 0 || !bs[len(bs)-1].SupersededAt.Equal(ats[i]) {
			bs = append(bs, memory.Branch{SupersededAt: ats[i]})
		}
		bs[len(bs)-1].Messages = append(bs[len(bs)-1].Messages, msgs[i])
	}
	return bs
}

// Migration is one embedded schema change, a file NNNN_description.sql.
type Migration struct {
	// Version is the file's number, Name the file's name without ".sql".
	Version int
	Name    string
	SQL     string
}

// Migrations reads the NNNN_description.sql files of fsys in version
// order; a file named otherwise, or two of one version, is an error.
func Migrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var ms []Migration
	seen := map[int]string{}
	for _, name := range names {
		prefix, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", other, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: strings.TrimSuffix(name, ".sql"), SQL: string(body)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	return ms, nil
}

// VectorQuery reports whether q asks a vector search for anything (an
// embedding and a positive limit), and memory.ErrInvalid for one whose Dims
// contradict its embedding.
func VectorQuery(q memory.ItemQuery) (bool, error) {
	if len(q.Embedding) == 0 || q.Limit <= 0 {
		return false, nil
	}
	if q.Dims != 0 && q.Dims != len(q.Embedding) {
		return false, fmt.Errorf("%w: vector query of %d dims says %d", memory.ErrInvalid, len(q.Embedding), q.Dims)
	}
	return true, nil
}
