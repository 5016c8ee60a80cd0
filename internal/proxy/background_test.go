package proxy

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// bgResponse is a background response of the Responses API as the
// provider gives it in status (queued, in_progress: no output yet;
// completed, incomplete: its answer; cancelled, failed: none).
func bgResponse(id, status string) string {
	output, usage, errv := `[]`, `null`, `null`
	switch status {
	case "completed", "incomplete":
		output = `[{"id":"msg_` + id + `","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Porto is in Portugal."}]}]`
		usage = `{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":17}`
	case "failed":
		errv = `{"code":"server_error","message":"The model failed."}`
	}
	return `{"id":"` + id + `","object":"response","created_at":1764770000,"status":"` + status + `","background":true,` +
		`"error":` + errv + `,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"o3-2025-04-16",` +
		`"output":` + output + `,"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":"medium","summary":null},` +
		`"store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],` +
		`"top_p":1.0,"truncation":"disabled","usage":` + usage + `,"user":null,"metadata":{}}`
}

// bgUpstream is a fake upstream of background responses: POST
// /v1/responses answers queued as resp_bg, GET /v1/responses/{id} the
// status set (in_progress until set).
type bgUpstream struct {
	*upstreamtest.Server
	mu     sync.Mutex
	status string
}

func newBGUpstream(t *testing.T) *bgUpstream {
	u := &bgUpstream{status: "in_progress"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(bgResponse("resp_bg", "queued")))
	})
	mux.HandleFunc("GET /v1/responses/{id}", func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		status := u.status
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(bgResponse(r.PathValue("id"), status)))
	})
	u.Server = upstreamtest.New(t, mux)
	return u
}

func (u *bgUpstream) set(status string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.status = status
}

// bgRequest is a background Responses request.
const bgRequest = `{"model":"o3","input":"Where is Porto?","background":true}`

// noCapture fails the test if captured holds an exchange, after the
// gateway's pending captures ended.
func noCapture(t *testing.T, g *gateway, captured chanCapturer) {
	t.Helper()
	g.p.captures.Wait()
	select {
	case ex := <-captured:
		t.Fatalf("captured %+v, want nothing", ex)
	default:
	}
}

// TestBackgroundResponseNotStoredQueued: a background response answers
// queued, with no output: its exchange is not stored with an empty
// reply.
func TestBackgroundResponseNotStoredQueued(t *testing.T) {
	up := newBGUpstream(t)
	captured := make(chanCapturer, 4)
	g := mustGateway(t, up.Server, nil, Deps{Resolver: identity.New(nil), Capturer: captured})
	resp, b := g.post(t, "/v1/responses", bgRequest, map[string]string{"X-Memory-User": "ana"})
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"status":"queued"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	noCapture(t, g, captured)
}

// bgCaptured waits for the exchange captured.
func bgCaptured(t *testing.T, captured chanCapturer) memory.Exchange {
	t.Helper()
	select {
	case ex := <-captured:
		return ex
	case <-time.After(30 * time.Second):
		t.Fatal("no exchange captured")
	}
	return memory.Exchange{}
}

var _ = context.Background
