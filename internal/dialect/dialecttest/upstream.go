// Package dialecttest provides a fake provider that speaks the Anthropic
// Messages and OpenAI Responses wire formats exactly — whole and streamed,
// tool calls included, with the providers' own error shapes for requests
// that break their rules — and runs the official SDK scripts under
// testdata/sdk against any base URL.
package dialecttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Recorded is one request the fake upstream received.
type Recorded struct {
	Path   string
	Header http.Header
	Body   []byte
}

// Upstream is a fake provider: POST /v1/messages answers like Anthropic,
// POST /v1/responses like OpenAI (background: true queues it, its output
// read by GET /v1/responses/{id}), and POST /v1/conversations creates a
// conversation of the Conversations API that a response may name; see
// stored.go for the other routes on stored state. A request that offers tools and carries no
// tool result gets a tool call (get the weather in Porto); any other gets a
// text answer that quotes the latest tool result or user text. Requests that
// break the provider's rules (see validateMessages, validateResponses) get
// a 400 in its error shape.
type Upstream struct {
	*httptest.Server
	mu        sync.Mutex
	requests  []Recorded
	responses map[string]bool             // response ids given out, for previous_response_id
	convs     map[string]bool             // conversation ids given out, for conversation
	stored    map[string]map[string]any   // the responses given out, completed
	items     map[string][]map[string]any // each conversation's items
	resolve   bool                        // read items by their ids (ResolveItemIDs)
	toolUses  int                         // tool_use blocks per call answer (ToolUses; 0: one)
	n         int
}

// NewUpstream starts an Upstream, closed when the test ends.
func NewUpstream(tb testing.TB) *Upstream {
	tb.Helper()
	u := StartUpstream()
	tb.Cleanup(u.Close)
	return u
}

// StartUpstream starts an Upstream outside a test (the manual client
// harness under testdata/sdk/clients); the caller closes it.
func StartUpstream() *Upstream {
	u := &Upstream{responses: map[string]bool{}, convs: map[string]bool{},
		stored: map[string]map[string]any{}, items: map[string][]map[string]any{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", u.record(u.messages))
	mux.HandleFunc("POST /v1/responses", u.record(u.responsesAPI))
	mux.HandleFunc("POST /v1/conversations", u.record(u.conversations))
	mux.HandleFunc("GET /v1/responses/{id}", u.record(u.retrieve))
	mux.HandleFunc("POST /v1/responses/input_tokens", u.record(u.inputTokens))
	mux.HandleFunc("POST /v1/responses/compact", u.record(u.compact))
	mux.HandleFunc("POST /v1/conversations/{id}/items", u.record(u.addItems))
	mux.HandleFunc("GET /v1/conversations/{id}/items", u.record(u.listItems))
	u.Server = httptest.NewServer(mux)
	return u
}

// Requests returns the requests received so far.
func (u *Upstream) Requests() []Recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Recorded(nil), u.requests...)
}

// next returns a fresh sequence number for ids.
func (u *Upstream) next() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.n++
	return u.n
}

// ToolUses makes the fake's Messages answer that calls a tool hold n
// tool_use blocks (parallel tool use: the weather in Porto, then other
// cities), each with its own id; below 1, one (the default).
func (u *Upstream) ToolUses(n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.toolUses = n
}

// toolUseCount returns how many tool_use blocks a call answer holds.
func (u *Upstream) toolUseCount() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return max(u.toolUses, 1)
}

// record reads and records the body, then calls h with it.
func (u *Upstream) record(h func(w http.ResponseWriter, r *http.Request, body []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		u.mu.Lock()
		u.requests = append(u.requests, Recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: b})
		u.mu.Unlock()
		h(w, r, b)
	}
}

// sse writes the events of a stream, flushing after each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event with its type and JSON data.
func (s *sse) event(typ string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err) // the fake's own maps always encode
	}
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", typ, b)
	if s.f != nil {
		s.f.Flush()
	}
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// pieces splits s into chunks of about n bytes, as providers stream text.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut < len(s) && !strings.HasPrefix(s[cut:], " ") && cut-n < 8 {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" || len(out) == 0 {
		out = append(out, s)
	}
	return out
}
