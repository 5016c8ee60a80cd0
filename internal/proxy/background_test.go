package proxy

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
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

// get sends GET path with the given headers.
func (g *gateway) get(t *testing.T, path string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, g.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

// TestBackgroundResponseCapturedWhenDone: the exchange of a background
// response is captured when the client's GET of the response returns it
// completed, with its answer and the request's turn, once; a GET while
// it runs, or by another user or tenant, captures nothing.
// (TestBackgroundResponseCompletedByAGETNamingNoUser: one naming no user
// does.)
func TestBackgroundResponseCapturedWhenDone(t *testing.T) {
	up := newBGUpstream(t)
	captured := make(chanCapturer, 4)
	g := mustGateway(t, up.Server, nil, Deps{Resolver: identity.New(nil), Capturer: captured})
	ana := map[string]string{"X-Memory-User": "ana"}
	if resp, b := g.post(t, "/v1/responses", bgRequest, ana); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if resp, b := g.get(t, "/v1/responses/resp_bg", ana); resp.StatusCode != 200 || !strings.Contains(string(b), `"in_progress"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	noCapture(t, g, captured)
	up.set("completed")
	for _, other := range []map[string]string{{"X-Memory-User": "bob"}, {"X-Memory-User": "ana", "X-Memory-Tenant": "acme"}} {
		if resp, b := g.get(t, "/v1/responses/resp_bg", other); resp.StatusCode != 200 || !strings.Contains(string(b), "Porto is in Portugal.") {
			t.Fatalf("%v: status %d: %s", other, resp.StatusCode, b)
		}
	}
	noCapture(t, g, captured)
	resp, b := g.get(t, "/v1/responses/resp_bg", ana)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "Porto is in Portugal.") {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	// Captured before the client got the answer.
	ex := bgCaptured(t, captured)
	if ex.Reply.Content != "Porto is in Portugal." || len(ex.Turn) != 1 || ex.Turn[0].Content != "Where is Porto?" {
		t.Errorf("captured reply %q, turn %+v", ex.Reply.Content, ex.Turn)
	}
	if ex.Identity.Tenant != memory.DefaultTenant || ex.Identity.User != "ana" || ex.Model != "o3" {
		t.Errorf("captured identity %+v, model %q", ex.Identity, ex.Model)
	}
	if ex.Usage == nil || ex.Usage.CompletionTokens != 5 {
		t.Errorf("captured usage %+v", ex.Usage)
	}
	// A second GET stores nothing more.
	g.get(t, "/v1/responses/resp_bg", ana)
	noCapture(t, g, captured)
}

// TestBackgroundResponseEndedWithoutAnswer: a background response
// cancelled or failed stores nothing, and its held exchange is dropped.
func TestBackgroundResponseEndedWithoutAnswer(t *testing.T) {
	for _, status := range []string{"cancelled", "failed"} {
		t.Run(status, func(t *testing.T) {
			up := newBGUpstream(t)
			captured := make(chanCapturer, 4)
			g := mustGateway(t, up.Server, nil, Deps{Resolver: identity.New(nil), Capturer: captured})
			ana := map[string]string{"X-Memory-User": "ana"}
			g.post(t, "/v1/responses", bgRequest, ana)
			up.set(status)
			if resp, b := g.get(t, "/v1/responses/resp_bg", ana); resp.StatusCode != 200 || !strings.Contains(string(b), status) {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			noCapture(t, g, captured)
			if !g.p.pending.empty() {
				t.Error("the exchange is still held")
			}
			up.set("completed")
			g.get(t, "/v1/responses/resp_bg", ana)
			noCapture(t, g, captured)
		})
	}
}

// TestBackgroundResponseWithGatewayKeys: with gateway keys and the
// operator's upstream key, the held exchange is captured by its user's
// GET of the response, never by another's (refused as the provider
// refuses an unknown id).
func TestBackgroundResponseWithGatewayKeys(t *testing.T) {
	up := newBGUpstream(t)
	captured := make(chanCapturer, 4)
	keys := []identity.Key{{Hash: identity.HashKey("gw-key"), Tenant: "a"}}
	g := mustGateway(t, up.Server, func(c *gatewayConfig) {
		c.Upstream.APIKey = "sk-operator"
		c.StateRetention = time.Hour
		c.Passthrough = []string{"GET /v1/responses/*"}
	}, Deps{Resolver: identity.New(keys), States: newFakeStates(), Capturer: captured})
	ana := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "ana"}
	if resp, b := g.post(t, "/v1/responses", bgRequest, ana); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	up.set("incomplete")
	if resp, b := g.get(t, "/v1/responses/resp_bg", map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another user's GET: status %d: %s", resp.StatusCode, b)
	}
	noCapture(t, g, captured)
	if resp, b := g.get(t, "/v1/responses/resp_bg", ana); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ex := bgCaptured(t, captured); ex.Reply.Content != "Porto is in Portugal." || ex.Identity.Tenant != "a" || ex.Identity.User != "ana" {
		t.Errorf("captured %q for %+v", ex.Reply.Content, ex.Identity)
	}
}

// bgEvent is one event of a background response's stream.
func bgEvent(typ string, seq int, rest string) string {
	return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\",\"sequence_number\":" + strconv.Itoa(seq) + "," + rest + "}\n\n"
}

// bgStreamHead is a background response's stream up to the first text
// delta; bgStreamTail the rest, as a GET with stream=true&starting_after=3
// resumes it.
var (
	bgStreamHead = bgEvent("response.created", 0, `"response":`+bgResponse("resp_bg", "queued")) +
		bgEvent("response.in_progress", 1, `"response":`+bgResponse("resp_bg", "in_progress")) +
		bgEvent("response.output_item.added", 2, `"output_index":0,"item":{"id":"msg_resp_bg","type":"message","status":"in_progress","role":"assistant","content":[]}`) +
		bgEvent("response.output_text.delta", 3, `"item_id":"msg_resp_bg","output_index":0,"content_index":0,"delta":"Porto is","logprobs":[]`)
	bgStreamTail = bgEvent("response.output_text.delta", 4, `"item_id":"msg_resp_bg","output_index":0,"content_index":0,"delta":" in Portugal.","logprobs":[]`) +
		bgEvent("response.output_text.done", 5, `"item_id":"msg_resp_bg","output_index":0,"content_index":0,"text":"Porto is in Portugal.","logprobs":[]`) +
		bgEvent("response.output_item.done", 6, `"output_index":0,"item":{"id":"msg_resp_bg","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Porto is in Portugal."}]}`) +
		bgEvent("response.completed", 7, `"response":`+bgResponse("resp_bg", "completed"))
)

// bgStreamUpstream streams a background response: POST with
// stream:true sends bgStreamHead, then the tail unless cut (then it
// waits for the gateway to hang up); GET with stream=true the tail.
func bgStreamUpstream(t *testing.T, cut bool) *upstreamtest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(bgStreamHead))
		w.(http.Flusher).Flush()
		if cut {
			<-r.Context().Done()
			return
		}
		_, _ = w.Write([]byte(bgStreamTail))
	})
	mux.HandleFunc("GET /v1/responses/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("stream") != "true" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(bgResponse(r.PathValue("id"), "completed")))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(bgStreamTail))
	})
	return upstreamtest.New(t, mux)
}

const bgStreamRequest = `{"model":"o3","input":"Where is Porto?","background":true,"stream":true}`

// TestBackgroundStreamCaptured: a background response streamed whole is
// captured as any stream, once: nothing stays held, in the process or
// in the shared store (which held it from the stream's head).
func TestBackgroundStreamCaptured(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "process", true: "shared"}[shared], func(t *testing.T) {
			captured := make(chanCapturer, 4)
			deps := Deps{Resolver: identity.New(nil), Capturer: captured}
			held := newFakeHeld()
			if shared {
				deps.Held = held
			}
			g := mustGateway(t, bgStreamUpstream(t, false), nil, deps)
			ana := map[string]string{"X-Memory-User": "ana"}
			if resp, b := g.post(t, "/v1/responses", bgStreamRequest, ana); resp.StatusCode != 200 || !strings.Contains(string(b), "response.completed") {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if ex := bgCaptured(t, captured); ex.Reply.Content != "Porto is in Portugal." {
				t.Errorf("captured %q", ex.Reply.Content)
			}
			g.get(t, "/v1/responses/resp_bg", ana)
			noCapture(t, g, captured)
			if n := held.heldCount(); n != 0 || !g.p.pending.empty() {
				t.Errorf("a stream read whole: %d held in the store, in the process %v; want none", n, !g.p.pending.empty())
			}
		})
	}
}

// postBGStream POSTs bgStreamRequest for user, and returns the response
// and what drops its stream (the client hangs up).
func postBGStream(t *testing.T, g *gateway, user string) (*http.Response, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/responses", strings.NewReader(bgStreamRequest))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Memory-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return resp, func() {
		cancel()
		resp.Body.Close()
	}
}

// readUntil reads resp's stream up to the first line containing s.
func readUntil(resp *http.Response, s string) {
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), s) {
	}
}

// TestBackgroundStreamResumed: a client that drops a background
// response's stream before its end (the response goes on at the
// provider) has its turn captured when it resumes the stream (GET
// stream=true), before it gets the terminal event; once.
func TestBackgroundStreamResumed(t *testing.T) {
	captured := make(chanCapturer, 4)
	g := mustGateway(t, bgStreamUpstream(t, true), nil, Deps{Resolver: identity.New(nil), Capturer: captured})
	ana := map[string]string{"X-Memory-User": "ana"}

	resp, drop := postBGStream(t, g, "ana")
	readUntil(resp, "output_text.delta")
	drop()
	deadline := time.Now().Add(30 * time.Second)
	for g.p.pending.empty() {
		if time.Now().After(deadline) {
			t.Fatal("the dropped stream's turn was not held")
		}
		time.Sleep(10 * time.Millisecond)
	}
	noCapture(t, g, captured)

	resp2, b := g.get(t, "/v1/responses/resp_bg?stream=true&starting_after=3", ana)
	if resp2.StatusCode != 200 || !strings.Contains(string(b), "response.completed") {
		t.Fatalf("status %d: %s", resp2.StatusCode, b)
	}
	if ex := bgCaptured(t, captured); ex.Reply.Content != "Porto is in Portugal." || ex.Turn[0].Content != "Where is Porto?" {
		t.Errorf("captured %q, turn %+v", ex.Reply.Content, ex.Turn)
	}
	g.get(t, "/v1/responses/resp_bg", ana)
	g.get(t, "/v1/responses/resp_bg?stream=true", ana)
	noCapture(t, g, captured)
}

// TestBackgroundResponseAfterAClearOrForget: a held exchange outlives a
// clear (the erasure notices' subscription starting or reconnecting,
// which forgets no one: the store refuses a turn said before an erasure
// it missed) and another user's forget, and is captured when its GET
// returns it done; its own user's forget drops it.
func TestBackgroundResponseAfterAClearOrForget(t *testing.T) {
	for _, tc := range []struct {
		name      string
		meanwhile func(p *Proxy)
		captured  bool
	}{
		{"clear", func(p *Proxy) { p.Clear() }, true},
		{"another user's forget", func(p *Proxy) { p.Forget(memory.DefaultTenant, "bob") }, true},
		{"another tenant's user's forget", func(p *Proxy) { p.Forget("acme", "ana") }, true},
		{"its user's forget", func(p *Proxy) { p.Forget(memory.DefaultTenant, "ana") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newBGUpstream(t)
			captured := make(chanCapturer, 4)
			g := mustGateway(t, up.Server, nil, Deps{Resolver: identity.New(nil), Capturer: captured})
			ana := map[string]string{"X-Memory-User": "ana"}
			if resp, b := g.post(t, "/v1/responses", bgRequest, ana); resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			tc.meanwhile(g.p)
			up.set("completed")
			if resp, b := g.get(t, "/v1/responses/resp_bg", ana); resp.StatusCode != 200 || !strings.Contains(string(b), "Porto is in Portugal.") {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if !tc.captured {
				noCapture(t, g, captured)
				return
			}
			if ex := bgCaptured(t, captured); ex.Reply.Content != "Porto is in Portugal." || ex.Identity.User != "ana" {
				t.Errorf("captured %q for %+v", ex.Reply.Content, ex.Identity)
			}
		})
	}
}
