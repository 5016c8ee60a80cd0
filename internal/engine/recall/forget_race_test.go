package recall

import (
	"context"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
)

// TestCachedKeepsNoVectorOfAUserErasedDuringTheCall: a user erased while
// their text is being embedded (the erasure's Forget runs between the
// call's start and its answer) has no vector in the cache afterwards: the
// flight's write comes after the Forget, where no later one looks.
func TestCachedKeepsNoVectorOfAUserErasedDuringTheCall(t *testing.T) {
	g := newGated()
	cache := NewEmbeddingCache(1 << 20)
	c := NewCached(g, cache, nil)
	const text = "my new address is 12 Rua Augusta"
	done := make(chan error, 1)
	go func() {
		_, err := c.EmbedOwned(context.Background(), []Owned{{Tenant: "t", User: "u", Text: text}}, time.Time{})
		done <- err
	}()
	waitFor(t, "the call", func() bool { _, n := g.count(""); return n == 1 })
	cache.Forget("t", "u") // the erasure, while the provider answers
	close(g.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the flight's end", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.inflight) == 0
	})
	key := EmbeddingKey{Model: "gated", Dims: 8, Tenant: "t", User: "u", Hash: ContentHash("gated", text)}
	if _, ok := cache.Get(key); ok {
		t.Fatal("the erased user's vector was cached after their erasure")
	}
	// A call begun after the erasure is cached as usual.
	if _, err := c.EmbedOwned(context.Background(), []Owned{{Tenant: "t", User: "u", Text: text}}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the later vector in the cache", func() bool { _, ok := cache.Get(key); return ok })
}

// gatedChatter answers every extraction with reply once its gate opens,
// counting the calls that reached it.
type gatedChatter struct {
	fakeChatter
	gate    chan struct{}
	arrived chan struct{}
}

func (c *gatedChatter) CreateChatCompletion(ctx context.Context, req openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error) {
	c.arrived <- struct{}{}
	<-c.gate
	return c.fakeChatter.CreateChatCompletion(ctx, req)
}

// TestExtractorKeepsNoAnswerOfAUserErasedDuringTheCall: the facts the
// model answered about a user erased while it was answering are not kept
// among the answers (they hold what the user said), though the erasure's
// Forget came before the round put them there.
func TestExtractorKeepsNoAnswerOfAUserErasedDuringTheCall(t *testing.T) {
	ch := &gatedChatter{fakeChatter: fakeChatter{reply: `{"facts":[{"type":"profile","key":"city","value":"Lisbon","confidence":0.9}]}`},
		gate: make(chan struct{}), arrived: make(chan struct{}, 4)}
	answers := NewAnswers()
	x := NewExtractor(ch, newFakeStore(), ExtractorOptions{Model: "m", MaxPerUser: 200, Answers: answers}, nil)
	ex := memory.Exchange{ID: "e1", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, At: time.Now(),
		Turn:  []memory.Message{{Role: "user", Content: "I live in Lisbon now."}},
		Reply: memory.Message{Role: "assistant", Content: "Nice!"}}
	done := make(chan error, 1)
	go func() {
		done <- x.AfterSaveBatch(context.Background(), []memory.Exchange{ex}, []memory.SaveResult{{Inserted: 2}})
	}()
	<-ch.arrived
	answers.Forget("t", "u") // the erasure, while the model answers
	close(ch.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, _ := answers.c.Usage(); n != 0 {
		t.Fatalf("%d answers kept of a user erased during the call, want none", n)
	}
}

// TestHooksKeepNothingOfAUserErasedSinceTheBatchWasRead: the extractor's
// answers and indexing's vectors, computed from a
// batch read before its user's erasure (the enricher's round carries the
// epoch it took before it claimed the batch: cache.WithEpoch), are not
// kept, though the erasure's Forget came before the hooks started; another
// user's are.
func TestHooksKeepNothingOfAUserErasedSinceTheBatchWasRead(t *testing.T) {
	ctx := context.Background()
	ch := &fakeChatter{reply: `{"facts":[{"type":"profile","key":"city","value":"Lisbon","confidence":0.9}]}`}
	answers, vectors := NewAnswers(), NewEmbeddingCache(1<<20)
	x := NewExtractor(ch, newFakeStore(), ExtractorOptions{Model: "m", MaxPerUser: 200, Answers: answers}, nil)
	c := NewCached(NewLocal(16), vectors, nil)
	exchange := func(user string) memory.Exchange {
		return memory.Exchange{ID: "e-" + user, Identity: memory.Identity{Tenant: "t", User: user, Conversation: "c"}, At: time.Now(),
			Turn:  []memory.Message{{Role: "user", Content: "I live in Lisbon now."}},
			Reply: memory.Message{Role: "assistant", Content: "Nice!"}}
	}
	read := cache.WithEpoch(ctx, cache.Epoch()) // the batch is claimed
	cache.Forgetters{answers, vectors}.Forget("t", "gone")
	for _, user := range []string{"gone", "kept"} {
		if err := x.AfterSaveBatch(read, []memory.Exchange{exchange(user)}, []memory.SaveResult{{Inserted: 2}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.EmbedOwned(read, []Owned{{Tenant: "t", User: user, Text: "I live in Lisbon now."}}, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	owners := func(drop func(func(string) bool)) map[string]int {
		n := map[string]int{}
		drop(func(user string) bool { n[user]++; return false })
		return n
	}
	ans := owners(func(f func(string) bool) { answers.c.Drop(func(k answerKey) bool { return f(k.User) }) })
	waitFor(t, "the flights' end", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.inflight) == 0 })
	vecs := owners(func(f func(string) bool) { vectors.Drop(func(k EmbeddingKey) bool { return f(k.User) }) })
	if ans["gone"]+vecs["gone"] > 0 {
		t.Fatalf("kept of the user erased after the batch was read: %d answers, %d vectors", ans["gone"], vecs["gone"])
	}
	if ans["kept"] == 0 || vecs["kept"] == 0 {
		t.Fatalf("the other user's answers (%d) or vectors (%d) were not kept", ans["kept"], vecs["kept"])
	}
}

// TestExtractorRetriesACallAClearCancelled: a clear of the calls in
// flight (an erasure notice subscription lost) cancels the extraction of
// a user nobody erased: it is asked again, and its facts are stored; when
// the store records the user's erasure since the exchange, it is not.
func TestExtractorRetriesACallAClearCancelled(t *testing.T) {
	for _, tt := range []struct {
		name     string
		erasedAt time.Time
		want     int
	}{
		{"not erased", time.Time{}, 1},
		{"erased since", time.Now().Add(time.Hour), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ch := &gatedChatter{fakeChatter: fakeChatter{reply: `{"facts":[{"type":"profile","key":"city","value":"Lisbon","confidence":0.9}]}`},
				gate: make(chan struct{}), arrived: make(chan struct{}, 4)}
			st, calls := newFakeStore(), cache.NewCalls()
			erased := func(context.Context, string, string) (time.Time, error) { return tt.erasedAt, nil }
			x := NewExtractor(ch, st, ExtractorOptions{Model: "m", MaxPerUser: 200, Calls: calls, Erased: erased}, nil)
			ex := memory.Exchange{ID: "e1", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, At: time.Now(),
				Turn:  []memory.Message{{Role: "user", Content: "I live in Lisbon now."}},
				Reply: memory.Message{Role: "assistant", Content: "Nice!"}}
			res := memory.SaveResult{Inserted: 2, GuardSince: ex.At, Stored: []memory.Message{{Key: "m1", Role: "user", Content: "I live in Lisbon now."}}}
			done := make(chan error, 1)
			go func() {
				ctx := cache.WithEpoch(context.Background(), cache.Epoch()) // the round's
				done <- x.AfterSaveBatch(ctx, []memory.Exchange{ex}, []memory.SaveResult{res})
			}()
			<-ch.arrived
			calls.Clear() // the round's call is cancelled, and its epoch refused
			close(ch.gate)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := len(st.facts); got != tt.want {
				t.Fatalf("%d facts stored after a clear during the extraction, want %d", got, tt.want)
			}
		})
	}
}
