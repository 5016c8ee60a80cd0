package recall

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// ManageStore is what the management API changes in the store.
type ManageStore interface {
	FactReader
	FactWriter
	// DeleteFact deletes one fact of the user, or returns memory.ErrNotFound.
	DeleteFact(ctx context.Context, tenant, user string, id int64) error
}

// Manager serves the facts and search management API: list, add or pin,
// delete facts, and search a user's memory. Every call is scoped to a
// tenant and user.
type Manager struct {
	store    ManageStore
	indexer  *Indexer
	recaller *Recaller
	maxUser  int
	ttl      map[memory.FactType]time.Duration
}

// NewManager returns a Manager over store, indexing added facts with
// indexer and searching with recaller; maxPerUser caps current facts per
// user and ttl gives facts of a type a default expiry.
func NewManager(store ManageStore, indexer *Indexer, recaller *Recaller, maxPerUser int, ttl map[memory.FactType]time.Duration) *Manager {
	return &Manager{store: store, indexer: indexer, recaller: recaller, maxUser: maxPerUser, ttl: ttl}
}

// Facts returns the user's current facts, or with history superseded and
// expired ones too, most recently updated first.
func (m *Manager) Facts(ctx context.Context, tenant, user string, history bool) ([]memory.Fact, error) {
	return m.store.Facts(ctx, tenant, user, time.Now(), history)
}

// AddFact validates f (a fact type; non-empty key up to 64 and value up to
// 300 characters; confidence in [0, 1], 0 meaning 1; an expiry, if any, in
// the future) and records it for f.Tenant and f.User as stated now: the
// same value raises its mentions, another value supersedes the current one.
// Without ExpiresAt the type's configured TTL applies. The fact is then
// indexed for search. It returns the current fact, or an error wrapping
// memory.ErrInvalid naming the bad field.
func (m *Manager) AddFact(ctx context.Context, f memory.Fact) (memory.Fact, error) {
	now := time.Now()
	f.Type = memory.FactType(strings.ToLower(strings.TrimSpace(string(f.Type))))
	f.Key, f.Value = NormalizeFactKey(f.Key), strings.TrimSpace(f.Value)
	switch {
	case !f.Type.Valid():
		return memory.Fact{}, fmt.Errorf("%w: type: must be one of profile, preference, goal, limit, decision, relationship, event", memory.ErrInvalid)
	case f.Key == "" || utf8.RuneCountInString(f.Key) > MaxFactKey:
		return memory.Fact{}, fmt.Errorf("%w: key: must have 1-%d characters of letters or digits", memory.ErrInvalid, MaxFactKey)
	case f.Value == "" || utf8.RuneCountInString(f.Value) > MaxFactValue:
		return memory.Fact{}, fmt.Errorf("%w: value: must have 1-%d characters", memory.ErrInvalid, MaxFactValue)
	case f.Confidence < 0 || f.Confidence > 1:
		return memory.Fact{}, fmt.Errorf("%w: confidence: must be between 0 and 1", memory.ErrInvalid)
	case f.ExpiresAt != nil && !f.ExpiresAt.After(now):
		return memory.Fact{}, fmt.Errorf("%w: expires_at: must be in the future", memory.ErrInvalid)
	}
	if f.Confidence == 0 {
		f.Confidence = 1
	}
	if ttl, ok := m.ttl[f.Type]; ok && ttl > 0 && f.ExpiresAt == nil {
		exp := now.Add(ttl)
		f.ExpiresAt = &exp
	}
	f.ID, f.Mentions, f.Conversation, f.SupersededAt = 0, 1, "", nil
	f.CreatedAt, f.UpdatedAt = now, now
	cur, err := m.store.UpsertFact(ctx, f, m.maxUser)
	if err != nil {
		return memory.Fact{}, fmt.Errorf("add fact: %w", err)
	}
	if m.indexer != nil {
		if cur.Tenant == "" {
			cur.Tenant = f.Tenant
		}
		if err := m.indexer.IndexFact(ctx, cur); err != nil {
			return cur, err
		}
	}
	return cur, nil
}

// DeleteFact deletes one of the user's facts, or returns memory.ErrNotFound.
// Its search item stops being returned at once (Recaller.Search keeps only
// current facts' items).
func (m *Manager) DeleteFact(ctx context.Context, tenant, user string, id int64) error {
	return m.store.DeleteFact(ctx, tenant, user, id)
}

// Search returns the user's best passages for query across all their
// conversations, at most topK (0: the configured top_k), best first.
func (m *Manager) Search(ctx context.Context, tenant, user, query string, topK int) ([]memory.Item, error) {
	return m.recaller.Search(ctx, tenant, user, query, topK)
}

// SearchIn is Search within one conversation ("": all of them).
func (m *Manager) SearchIn(ctx context.Context, tenant, user, conversation, query string, topK int) ([]memory.Item, error) {
	return m.recaller.SearchIn(ctx, tenant, user, conversation, query, topK)
}
