package recall

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// fakeStore is an in-memory Knowledge store for unit tests: cosine search
// over items, word-overlap text search, facts with the upsert rules of the
// contract.
type fakeStore struct {
	mu       sync.Mutex
	items    []memory.Item
	nextID   int64
	facts    []memory.Fact
	summary  map[string]memory.Summary
	messages map[string][]memory.Message
	failAdd  error
	erased   map[string]time.Time // "tenant/user" → when erased
	// backlog is the index backlog, in the order recorded.
	backlog   []memory.PendingIndex
	backlogID int64
}

func newFakeStore() *fakeStore {
	return &fakeStore{summary: map[string]memory.Summary{}, messages: map[string][]memory.Message{}}
}

func (s *fakeStore) AddItems(_ context.Context, items []memory.Item) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAdd != nil {
		return s.failAdd
	}
next:
	for _, it := range items {
		for i, old := range s.items {
			if old.Tenant == it.Tenant && old.User == it.User && old.Kind == it.Kind && old.Ref == it.Ref && old.Chunk == it.Chunk {
				it.ID = old.ID
				s.items[i] = it
				continue next
			}
		}
		s.nextID++
		it.ID = s.nextID
		s.items = append(s.items, it)
	}
	return nil
}

func (s *fakeStore) EmbedItems(_ context.Context, items []memory.Item) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAdd != nil {
		return s.failAdd
	}
	for _, it := range items {
		for i, old := range s.items {
			if old.Tenant == it.Tenant && old.User == it.User && old.Kind == it.Kind && old.Ref == it.Ref && old.Chunk == it.Chunk && old.Text == it.Text {
				s.items[i].Embedding, s.items[i].Model, s.items[i].Dims = it.Embedding, it.Model, len(it.Embedding)
			}
		}
	}
	return nil
}

func (s *fakeStore) scoped(q memory.ItemQuery) []memory.Item {
	ex := map[string]bool{}
	for _, r := range q.ExcludeRefs {
		ex[r] = true
	}
	var out []memory.Item
	for _, it := range s.items {
		if it.Tenant != q.Tenant || it.User != q.User || ex[it.Ref] {
			continue
		}
		if q.Conversation != "" && it.Conversation != q.Conversation {
			continue
		}
		out = append(out, it)
	}
	return out
}

func (s *fakeStore) SearchVector(_ context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []memory.Item
	for _, it := range s.scoped(q) {
		if it.Model != q.Model || it.Dims != q.Dims || len(it.Embedding) != len(q.Embedding) {
			continue
		}
		it.Score = Cosine(it.Embedding, q.Embedding)
		out = append(out, it)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	return out[:min(len(out), q.Limit)], nil
}

func (s *fakeStore) SearchText(_ context.Context, q memory.ItemQuery) ([]memory.Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	words := map[string]bool{}
	for _, w := range tokenize(q.Text) {
		if !stopwords[w] {
			words[w] = true
		}
	}
	related := map[string]float64{}
	for _, r := range q.Related {
		if !words[r.Term] {
			related[r.Term] = max(related[r.Term], r.Weight)
		}
	}
	var out []memory.Item
	for _, it := range s.scoped(q) {
		n := 0.0
		for _, w := range tokenize(it.Text) {
			if words[w] {
				n++
			}
			n += related[w]
		}
		if n > 0 {
			it.Score = n
			it.Embedding = nil // like a real text search: no vectors
			out = append(out, it)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	return out[:min(len(out), q.Limit)], nil
}

func (s *fakeStore) ItemsToEmbed(_ context.Context, model string, dims int, after int64, limit int) ([]memory.Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []memory.Item
	for _, it := range s.items {
		if it.ID > after && (it.Model != model || it.Dims != dims || it.Embedding == nil) && len(out) < limit {
			out = append(out, it)
		}
	}
	return out, nil
}

func (s *fakeStore) LatestSummary(_ context.Context, id memory.Identity) (memory.Summary, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum, ok := s.summary[id.Tenant+"/"+id.User+"/"+id.Conversation]
	if !ok {
		return memory.Summary{}, memory.ErrNotFound
	}
	return sum, nil
}

func (s *fakeStore) Conversation(_ context.Context, id memory.Identity) (memory.Conversation, []memory.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	msgs, ok := s.messages[id.Tenant+"/"+id.User+"/"+id.Conversation]
	if !ok {
		return memory.Conversation{}, nil, memory.ErrNotFound
	}
	return memory.Conversation{ID: id.Conversation}, msgs, nil
}

// ErasedAt answers what erased holds (zero: never erased).
func (s *fakeStore) ErasedAt(_ context.Context, tenant, user string) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.erased[tenant+"/"+user], nil
}

func (s *fakeStore) Facts(_ context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []memory.Fact
	for _, f := range s.facts {
		if f.Tenant == tenant && f.User == user && (history || f.Current(now)) {
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].UpdatedAt.After(out[j].UpdatedAt) })
	return out, nil
}

func (s *fakeStore) UpsertFact(_ context.Context, f memory.Fact, _ int) (memory.Fact, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(strings.Join(strings.Fields(f.Key), " "))
	for i, old := range s.facts {
		if old.Tenant != f.Tenant || old.User != f.User || old.Type != f.Type || strings.ToLower(old.Key) != key || old.SupersededAt != nil {
			continue
		}
		if old.Value == f.Value {
			s.facts[i].Mentions++
			s.facts[i].UpdatedAt = f.UpdatedAt
			return s.facts[i], nil
		}
		at := f.UpdatedAt
		s.facts[i].SupersededAt = &at
		f.Pinned = f.Pinned || old.Pinned
	}
	s.nextID++
	f.ID, f.Key = s.nextID, key
	if f.Mentions == 0 {
		f.Mentions = 1
	}
	s.facts = append(s.facts, f)
	return f, nil
}

func (s *fakeStore) DeleteFact(_ context.Context, tenant, user string, id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.facts {
		if f.ID == id && f.Tenant == tenant && f.User == user {
			s.facts = append(s.facts[:i], s.facts[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("fact %d: %w", id, memory.ErrNotFound)
}

// countingEmbedder wraps an Embedder and counts the texts it embeds.
type countingEmbedder struct {
	Embedder
	mu    sync.Mutex
	texts int
	err   error
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string, by time.Time) ([][]float32, error) {
	c.mu.Lock()
	c.texts += len(texts)
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return c.Embedder.Embed(ctx, texts, by)
}

// DeferIndex records the entries whose message messages holds.
func (s *fakeStore) DeferIndex(_ context.Context, entries []memory.PendingIndex) error {
	s.mu.Lock()
	defer s.mu.Unlock()
next:
	for _, p := range entries {
		if _, ok := s.message(p.Identity, p.Key); !ok {
			continue
		}
		for i, old := range s.backlog {
			if old.Identity == p.Identity && old.Key == p.Key {
				if p.Chunk > old.Chunk {
					s.backlog[i].Chunk, s.backlog[i].Offset = p.Chunk, p.Offset
				}
				continue next
			}
		}
		s.backlogID++
		p.ID = s.backlogID
		s.backlog = append(s.backlog, p)
	}
	return nil
}

// PendingIndex returns the first entries, with their messages.
func (s *fakeStore) PendingIndex(_ context.Context, limit, maxBytes int) ([]memory.PendingIndex, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []memory.PendingIndex
	read := 0
	for _, p := range s.backlog {
		if len(out) == limit || len(out) > 0 && read+p.Bytes > maxBytes {
			break
		}
		read += p.Bytes
		p.Message, _ = s.message(p.Identity, p.Key)
		out = append(out, p)
	}
	return out, nil
}

// ResolveIndex removes the entries done and moves the others on.
func (s *fakeStore) ResolveIndex(_ context.Context, entries []memory.PendingIndex) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range entries {
		for i, old := range s.backlog {
			if old.ID != p.ID {
				continue
			}
			if p.Done {
				s.backlog = append(s.backlog[:i], s.backlog[i+1:]...)
			} else if p.Chunk > old.Chunk {
				s.backlog[i].Chunk, s.backlog[i].Offset = p.Chunk, p.Offset
			}
			break
		}
	}
	return nil
}

// message returns the message of key in conversation id.
func (s *fakeStore) message(id memory.Identity, key string) (memory.Message, bool) {
	for _, m := range s.messages[id.Tenant+"/"+id.User+"/"+id.Conversation] {
		if m.Key == key {
			return m, true
		}
	}
	return memory.Message{}, false
}
