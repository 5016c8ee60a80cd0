package recall

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// embeddingsServer is a fake /v1/embeddings endpoint answering each input
// with a deterministic dims-dimensional vector, recording batch sizes.
type embeddingsServer struct {
	mu      sync.Mutex
	batches []int
	dims    int
}

func (s *embeddingsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Input      []string `json:"input"`
		Model      string   `json:"model"`
		Dimensions int      `json:"dimensions"`
	}
	if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.batches = append(s.batches, len(req.Input))
	s.mu.Unlock()
	local := NewLocal(req.Dimensions)
	vecs, _ := local.Embed(r.Context(), req.Input, time.Time{})
	type datum struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	resp := struct {
		Object string  `json:"object"`
		Data   []datum `json:"data"`
		Model  string  `json:"model"`
	}{Object: "list", Model: req.Model}
	// Answer in reverse order: the embedder must place vectors by index.
	for i := len(vecs) - 1; i >= 0; i-- {
		resp.Data = append(resp.Data, datum{"embedding", i, vecs[i]})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

func (s *embeddingsServer) calls() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.batches...)
}

func mustOpenAIEmbedder(t *testing.T, dims, batch int) (*OpenAI, *embeddingsServer) {
	t.Helper()
	fake := &embeddingsServer{dims: dims}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	cfg := openai.DefaultConfig("test-key")
	cfg.BaseURL = srv.URL + "/v1"
	return NewOpenAI(openai.NewClientWithConfig(cfg), "text-embedding-3-small", dims, batch), fake
}

// memCache is an in-memory EmbeddingCache.
type memCache struct {
	mu sync.Mutex
	m  map[EmbeddingKey][]float32
}

func (c *memCache) Get(k EmbeddingKey) ([]float32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *memCache) Put(k EmbeddingKey, v []float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[EmbeddingKey][]float32{}
	}
	c.m[k] = v
}

// Epoch is 0: memCache forgets nothing.
func (c *memCache) Epoch() uint64 { return 0 }

// PutSince is Put.
func (c *memCache) PutSince(_ uint64, k EmbeddingKey, v []float32) bool {
	c.Put(k, v)
	return true
}

func TestOpenAIEmbedderBatches(t *testing.T) {
	tests := []struct {
		name  string
		texts int
		batch int
		want  []int
	}{
		{"one batch", 3, 64, []int{3}},
		{"exact batches", 4, 2, []int{2, 2}},
		{"remainder", 5, 2, []int{2, 2, 1}},
		{"nothing", 0, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			emb, fake := mustOpenAIEmbedder(t, 16, tt.batch)
			texts := make([]string, tt.texts)
			for i := range texts {
				texts[i] = fmt.Sprintf("text number %d about Lisbon", i)
			}
			vecs, err := emb.Embed(context.Background(), texts, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if got := fake.calls(); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("batches = %v, want %v", got, tt.want)
			}
			want, _ := NewLocal(16).Embed(context.Background(), texts, time.Time{})
			for i := range texts {
				if Cosine(vecs[i], want[i]) < 0.9999 {
					t.Fatalf("vector %d is not the one for its text", i)
				}
			}
		})
	}
}

func TestOpenAIEmbedderRejectsWrongDimensions(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,-0.2,0.3]}]}`)
	}))
	t.Cleanup(srv.Close)
	cfg := openai.DefaultConfig("k")
	cfg.BaseURL = srv.URL + "/v1"
	emb := NewOpenAI(openai.NewClientWithConfig(cfg), "m", 8, 4)
	if _, err := emb.Embed(context.Background(), []string{"x"}, time.Time{}); err == nil {
		t.Fatal("a 3-dimensional answer for 8 dimensions must fail")
	}
}

func TestCachedEmbedderHitsMakeNoRequest(t *testing.T) {
	emb, fake := mustOpenAIEmbedder(t, 16, 2)
	cache := &memCache{}
	c := NewCached(emb, cache, nil)
	ctx := context.Background()
	first, err := c.Embed(ctx, []string{"I live in Lisbon", "I am vegetarian", "I live in Lisbon"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fake.calls(); fmt.Sprint(got) != "[2]" {
		t.Fatalf("first call batches = %v, want one request with the 2 distinct texts", got)
	}
	second, err := c.Embed(ctx, []string{"I am vegetarian", "I live in Lisbon"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(fake.calls()); n != 1 {
		t.Fatalf("cached texts made %d more requests", n-1)
	}
	if Cosine(second[1], first[0]) < 0.9999 || Cosine(second[0], first[1]) < 0.9999 {
		t.Fatal("cached vectors differ from the embedded ones")
	}
	if _, err := c.Embed(ctx, []string{"I am vegetarian", "I moved to Porto"}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := fake.calls(); fmt.Sprint(got) != "[2 1]" {
		t.Fatalf("batches = %v, want only the new text embedded", got)
	}
}

func TestContentHashSeparatesModels(t *testing.T) {
	if ContentHash("a", "text") == ContentHash("b", "text") || ContentHash("a", "x") == ContentHash("a", "y") {
		t.Fatal("hash collides across models or texts")
	}
	if ContentHash("ab", "c") == ContentHash("a", "bc") {
		t.Fatal("model and text boundary is ambiguous")
	}
}
