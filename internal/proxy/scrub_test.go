package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// The operator's provider account as the fake upstream speaks of it.
const (
	operatorKey          = "sk-proj-operatorKEY0123456789abcd"
	operatorAnthropicKey = "sk-ant-api03-operatorKEY0123456789wxyz"
	openaiOrg            = "org-AbC123"
	openaiProject        = "proj_Xy12Ab34Cd56Ef78Gh90Ij12"
	anthropicOrg         = "7c4b2f0e-1d3a-4b5c-9e8f-0a1b2c3d4e5f"
)

// secrets are what no tenant may read when the operator's keys are used.
var secrets = []string{operatorKey, operatorAnthropicKey, "operatorKEY", "sk-proj-", "****", "abcd", openaiOrg, openaiProject, anthropicOrg}

// withAccount adds the provider's account headers to h's answers.
func withAccount(h http.Handler) http.Handler {
	return upstreamtest.WithHeader(upstreamtest.WithHeader(upstreamtest.WithHeader(h,
		"Openai-Organization", openaiOrg), "Openai-Project", openaiProject), "Anthropic-Organization-Id", anthropicOrg)
}

// accountGateway is a gateway in front of up for both APIs, with the
// operator's keys when shared.
func accountGateway(t *testing.T, up *upstreamtest.Server, shared bool, deps Deps) *gateway {
	t.Helper()
	return mustGateway(t, up, func(c *gatewayConfig) {
		c.Upstream.Anthropic.BaseURL = up.URL()
		if shared {
			c.Upstream.APIKey = operatorKey
			c.Upstream.Anthropic.APIKey = operatorAnthropicKey
		}
	}, deps)
}

var (
	openai401 = `{"error":{"message":"Incorrect API key provided: sk-proj-********************abcd. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	openai403 = "{\"error\":{\"message\":\"Project `" + openaiProject + "` does not have access to model `gpt-5`\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}"
	openai429 = `{"error":{"message":"Rate limit reached for gpt-4o in organization ` + openaiOrg + ` on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	openai500 = `{"error":{"message":"The server had an error processing your request (organization ` + openaiOrg + `, project ` + openaiProject + `).","type":"server_error","param":null,"code":null}}`
	claude401 = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`
	claude429 = `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization (` + anthropicOrg + `) of 50,000 input tokens per minute."}}`
)

const (
	streamingChat     = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	claudeRequest     = `{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	claudeStreaming   = `{"model":"claude-sonnet-4-6","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	responsesRequest  = `{"model":"gpt-4o","input":"hi"}`
	responsesStreamed = `{"model":"gpt-4o","stream":true,"input":"hi"}`
)

// TestSharedKeyCredentialsRefused: with the operator's key, the provider
// refusing it (401, 403) reaches the tenant as a gateway 502 in the
// route's error shape that says so, without the key's fragment or the
// account's ids, and tells the SDK not to retry; the upstream is called
// once.
func TestSharedKeyCredentialsRefused(t *testing.T) {
	tests := []struct {
		name, method, path, body string
		upstream                 http.Handler
		anthropic                bool
	}{
		{"chat 401", "POST", "/v1/chat/completions", simpleChat, upstreamtest.JSON(401, openai401), false},
		{"chat stream 401", "POST", "/v1/chat/completions", streamingChat, upstreamtest.JSON(401, openai401), false},
		{"chat 403", "POST", "/v1/chat/completions", simpleChat, upstreamtest.JSON(403, openai403), false},
		{"responses 401", "POST", "/v1/responses", responsesStreamed, upstreamtest.JSON(401, openai401), false},
		{"models 401", "GET", "/v1/models", "", upstreamtest.JSON(401, openai401), false},
		{"messages 401", "POST", "/v1/messages", claudeRequest, upstreamtest.JSON(401, claude401), true},
		{"messages stream 401", "POST", "/v1/messages", claudeStreaming, upstreamtest.JSON(401, claude401), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, withAccount(tt.upstream))
			g := accountGateway(t, up, true, Deps{})
			req, err := http.NewRequest(tt.method, g.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, b := do(t, req)
			if resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("status %d, want 502: %s", resp.StatusCode, b)
			}
			if v := resp.Header.Get("X-Should-Retry"); v != "false" {
				t.Errorf("X-Should-Retry %q, want false", v)
			}
			noAccount(t, resp.Header, b)
			var msg string
			if tt.anthropic {
				var e struct {
					Type  string `json:"type"`
					Error struct{ Type, Message string }
				}
				if json.Unmarshal(b, &e) != nil || e.Type != "error" || e.Error.Type != "api_error" {
					t.Fatalf("not an Anthropic api_error: %s", b)
				}
				msg = e.Error.Message
			} else {
				if typ, code, _ := apiErrorBody(t, b); typ != "upstream_error" || code != "upstream_credentials_refused" {
					t.Errorf("type %q code %q, want upstream_error upstream_credentials_refused", typ, code)
				}
				msg = string(b)
			}
			if !strings.Contains(msg, "refused the gateway's provider credentials") {
				t.Errorf("message does not say the gateway's credentials were refused: %s", b)
			}
			if tt.name == "chat 403" && !strings.Contains(msg, "Project `[redacted]` does not have access to model `gpt-5`") {
				t.Errorf("the provider's reason is lost: %s", b)
			}
			if n := up.Calls(); n != 1 {
				t.Errorf("upstream calls %d, want 1", n)
			}
		})
	}
}

// noAccount fails the test when a response's headers or body name the
// operator's account or key.
func noAccount(t *testing.T, h http.Header, body []byte) {
	t.Helper()
	for _, k := range accountHeaders {
		if v := h.Values(k); len(v) > 0 {
			t.Errorf("header %s: %v relayed", k, v)
		}
	}
	for _, s := range secrets {
		if strings.Contains(string(body), s) {
			t.Errorf("body names %q: %s", s, body)
		}
	}
}

// TestProviderErrorsRedacted: with the operator's key, other provider
// errors keep their status, shape, message and headers (Retry-After
// included) with the account's ids redacted and its headers dropped; with
// the client's own key every answer is the provider's, byte for byte.
func TestProviderErrorsRedacted(t *testing.T) {
	tests := []struct {
		name, path, body string
		status           int
		upstream         string
		// redactedIDs are the ids the shared-key answer redacts.
		redactedIDs []string
	}{
		{"chat 429", "/v1/chat/completions", simpleChat, 429, openai429, []string{openaiOrg}},
		{"chat stream 500", "/v1/chat/completions", streamingChat, 500, openai500, []string{openaiOrg, openaiProject}},
		{"responses 429", "/v1/responses", responsesRequest, 429, openai429, []string{openaiOrg}},
		{"messages 429", "/v1/messages", claudeRequest, 429, claude429, []string{anthropicOrg}},
		{"own key: chat 401", "/v1/chat/completions", simpleChat, 401, openai401, nil},
		{"own key: messages 401", "/v1/messages", claudeRequest, 401, claude401, nil},
	}
	for _, tt := range tests {
		for _, shared := range []bool{true, false} {
			if shared && tt.redactedIDs == nil {
				continue // a 401 with the operator's key: TestSharedKeyCredentialsRefused
			}
			name := tt.name + map[bool]string{true: " (operator's key)", false: " (client's key)"}[shared]
			t.Run(name, func(t *testing.T) {
				upstream := upstreamtest.WithHeader(upstreamtest.WithHeader(upstreamtest.JSON(tt.status, tt.upstream),
					"Retry-After", "2"), "X-Ratelimit-Remaining-Tokens", "1000")
				up := upstreamtest.New(t, withAccount(upstream))
				g := accountGateway(t, up, shared, Deps{})
				resp, b := g.post(t, tt.path, tt.body, map[string]string{"Authorization": "Bearer sk-client-own", "X-Api-Key": "sk-ant-client-own"})
				want := tt.upstream
				if shared {
					for _, id := range tt.redactedIDs {
						want = strings.ReplaceAll(want, id, "[redacted]")
					}
				}
				if resp.StatusCode != tt.status || string(b) != want {
					t.Fatalf("status %d body %s\nwant %d %s", resp.StatusCode, b, tt.status, want)
				}
				if resp.Header.Get("Retry-After") != "2" {
					t.Errorf("Retry-After lost: %v", resp.Header)
				}
				// The operator's quota, which every tenant's traffic
				// draws on, is the client's own only with its own key.
				if got := resp.Header.Get("X-Ratelimit-Remaining-Tokens"); got != map[bool]string{true: "", false: "1000"}[shared] {
					t.Errorf("X-Ratelimit-Remaining-Tokens %q with the operator's key %v", got, shared)
				}
				if v := resp.Header.Get("X-Should-Retry"); v != "" {
					t.Errorf("X-Should-Retry %q on an answer memgate did not retry", v)
				}
				if shared {
					noAccount(t, resp.Header, b)
				} else if resp.Header.Get("Openai-Organization") != openaiOrg || resp.Header.Get("Anthropic-Organization-Id") != anthropicOrg {
					t.Errorf("the client's own account headers were dropped: %v", resp.Header)
				}
			})
		}
	}
}

// TestSharedKeyStreamErrorEvents: with the operator's key, the error events
// of a stream (chat's data error, Anthropic's and the Responses API's
// error events, response.failed) have the account's ids redacted; every
// other event passes byte for byte — the model's text may name such ids —
// and the exchange is still captured, marked failed.
func TestSharedKeyStreamErrorEvents(t *testing.T) {
	// The model's own text, which mentions ids of the same forms.
	const said = "Your ids: org-ZZZ999yyy and 11111111-2222-3333-4444-555555555555."
	tests := []struct {
		name, path, body string
		// before is the stream up to its error event, relayed as sent;
		// fault is the error event naming the account (ID for the id).
		before, fault string
	}{
		{"chat", "/v1/chat/completions", streamingChat,
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"" + said + "\"}}]}\n\n",
			"data: {\"error\":{\"message\":\"Rate limit reached in organization ID.\",\"type\":\"tokens\"}}\n\n"},
		{"anthropic error event", "/v1/messages", claudeStreaming,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"c\",\"usage\":{\"input_tokens\":5,\"output_tokens\":0}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + said + "\"}}\n\n",
			"event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"rate_limit_error\", \"message\": \"Over the limit of your organization (ID).\"}}\n\n"},
		{"responses error event", "/v1/responses", responsesStreamed,
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"object\":\"response\",\"status\":\"in_progress\",\"error\":null,\"output\":[]}}\n\n" +
				"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"" + said + "\"}\n\n",
			"event: error\r\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Rate limit reached in organization ID.\"}\r\n\r\n"},
		{"responses response.failed", "/v1/responses", responsesStreamed,
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"" + said + "\"}\n\n",
			"event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r1\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"Failed for project ID.\"},\"output\":[]}}\n\n"},
	}
	for _, tt := range tests {
		id := openaiOrg
		if strings.HasPrefix(tt.name, "anthropic") {
			id = anthropicOrg
		}
		if strings.HasSuffix(tt.name, "failed") {
			id = openaiProject
		}
		stream := tt.before + strings.ReplaceAll(tt.fault, "ID", id)
		for _, shared := range []bool{true, false} {
			t.Run(tt.name+map[bool]string{true: " (operator's key)", false: " (client's key)"}[shared], func(t *testing.T) {
				captured := make(chanCapturer, 1)
				up := upstreamtest.New(t, scriptedStream(stream))
				g := accountGateway(t, up, shared, Deps{Resolver: identity.New(nil), Capturer: captured})
				resp, got := g.post(t, tt.path, tt.body, map[string]string{"X-Memory-User": "alice", "X-Memory-Conversation": "c1"})
				want := stream
				if shared {
					want = tt.before + strings.ReplaceAll(tt.fault, "ID", "[redacted]")
				}
				if resp.StatusCode != 200 || string(got) != want {
					t.Fatalf("status %d, relayed\n%q\nwant\n%q", resp.StatusCode, got, want)
				}
				ex := wait(t, captured, "capture")
				if !ex.Reply.Failed() {
					t.Errorf("captured reply %s, want it marked failed", ex.Reply.Raw)
				}
			})
		}
	}
}

// TestScrubStreamPieces: the stream scrubber gives the same bytes however
// the upstream's stream is cut into reads, a last line without its line
// ending included.
func TestScrubStreamPieces(t *testing.T) {
	up := &target{secret: operatorKey}
	in := "data: {\"choices\":[{\"delta\":{\"content\":\"" + openaiOrg + "\"}}]}\n\n" +
		"data: {\"error\":{\"message\":\"key " + operatorKey + " of " + openaiOrg + "\"}}\n\n" +
		"event: error\ndata: {\"type\":\"error\",\"message\":\"" + anthropicOrg + "\"}"
	want := "data: {\"choices\":[{\"delta\":{\"content\":\"" + openaiOrg + "\"}}]}\n\n" +
		"data: {\"error\":{\"message\":\"key [redacted] of [redacted]\"}}\n\n" +
		"event: error\ndata: {\"type\":\"error\",\"message\":\"[redacted]\"}"
	// A line longer than maxEventLine passes as it comes, in pieces.
	long := "data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("x", maxEventLine+100) + "\"}}]}\n\n"
	in, want = long+in, long+want
	scrubsInPieces(t, up, in, want)
}

// scrubsInPieces fails the test unless the scrubber for up turns the
// stream in into want however it is cut into reads.
func scrubsInPieces(t *testing.T, up *target, in, want string) {
	t.Helper()
	for name, r := range map[string]io.Reader{
		"whole":        strings.NewReader(in),
		"byte by byte": iotest.OneByteReader(strings.NewReader(in)),
		"halves":       iotest.HalfReader(strings.NewReader(in)),
	} {
		got, err := io.ReadAll(&scrubStream{ReadCloser: io.NopCloser(r), t: up})
		if err != nil || string(got) != want {
			t.Errorf("%s: %v\n%q\nwant\n%q", name, err, got, want)
		}
	}
}

// TestOfficialSDKSeesRefusedCredentials: the official SDKs, given the
// gateway's 502 for the operator's refused key, raise a server error (not
// an authentication error about the client's own key) that says what
// happened, without retrying.
func TestOfficialSDKSeesRefusedCredentials(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/v1/chat/completions", upstreamtest.JSON(401, openai401))
	mux.Handle("/v1/messages", upstreamtest.JSON(401, claude401))
	up := upstreamtest.New(t, withAccount(mux))
	g := accountGateway(t, up, true, Deps{})
	openai, anthropic := runFailingSDKs(t, g)
	for name, f := range map[string]sdkFailure{"openai": openai, "anthropic": anthropic} {
		if f.Class != "InternalServerError" || f.Status != 502 || f.ShouldRetry != "false" ||
			!strings.Contains(f.Message, "refused the gateway's provider credentials") {
			t.Errorf("%s SDK: %+v, want InternalServerError 502 saying the gateway's credentials were refused", name, f)
		}
		for _, s := range secrets {
			if strings.Contains(f.Message, s) {
				t.Errorf("%s SDK: message names %q: %s", name, s, f.Message)
			}
		}
	}
	if n := up.Calls(); n != 2 {
		t.Errorf("upstream calls %d, want 2 (one per SDK call)", n)
	}
}

// TestSharedKeyUnreadableErrorWithheld: with the operator's key, an error
// body memgate cannot read to redact (compressed, though it asked for no
// encoding, or larger than maxErrorBody) keeps its status and is replaced by
// the gateway's error.
func TestSharedKeyUnreadableErrorWithheld(t *testing.T) {
	huge := `{"error":{"message":"` + openaiOrg + strings.Repeat(" ", maxErrorBody) + `"}}`
	for name, h := range map[string]http.Handler{
		"compressed": upstreamtest.WithHeader(upstreamtest.JSON(500, openai500), "Content-Encoding", "br"),
		"too large":  upstreamtest.JSON(500, huge),
	} {
		t.Run(name, func(t *testing.T) {
			up := upstreamtest.New(t, withAccount(h))
			g := accountGateway(t, up, true, Deps{})
			resp, b := g.post(t, "/v1/chat/completions", simpleChat, nil)
			if resp.StatusCode != 500 || resp.Header.Get("Content-Encoding") != "" {
				t.Fatalf("status %d, Content-Encoding %q: %s", resp.StatusCode, resp.Header.Get("Content-Encoding"), b)
			}
			if _, code, _ := apiErrorBody(t, b); code != "upstream_error" {
				t.Errorf("code %q, want upstream_error", code)
			}
			noAccount(t, resp.Header, b)
		})
	}
}

// TestScrubStreamUnnamedTypedErrors: an upstream that sends its events
// without event: lines (an OpenAI- or Anthropic-compatible server) has its
// error events known by their data's type, as the capture's stream readers
// know them: a Responses error or response.failed, an Anthropic error.
// Their account ids are redacted; an unnamed event of another type passes
// byte for byte, ids and "error" members in the model's text included.
func TestScrubStreamUnnamedTypedErrors(t *testing.T) {
	up := &target{secret: operatorKey}
	for _, tc := range []struct{ name, in, want string }{
		{"responses error",
			"data: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Rate limit reached in organization " + openaiOrg + ".\"}\n\n",
			"data: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Rate limit reached in organization [redacted].\"}\n\n"},
		{"responses failed",
			"data: {\"type\":\"response.failed\",\"response\":{\"id\":\"r1\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"Failed for project " + openaiProject + ".\"},\"output\":[]}}\n\n",
			"data: {\"type\":\"response.failed\",\"response\":{\"id\":\"r1\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"Failed for project [redacted].\"},\"output\":[]}}\n\n"},
		{"anthropic error, spaced",
			"data: {\"type\" : \"error\", \"message\": \"Over the limit of your organization (" + anthropicOrg + ").\"}\r\n\r\n",
			"data: {\"type\" : \"error\", \"message\": \"Over the limit of your organization ([redacted]).\"}\r\n\r\n"},
		{"model text",
			"data: {\"type\":\"response.output_text.delta\",\"delta\":\"type \\\"error\\\" " + openaiOrg + "\",\"error\":null}\n\n",
			"data: {\"type\":\"response.output_text.delta\",\"delta\":\"type \\\"error\\\" " + openaiOrg + "\",\"error\":null}\n\n"},
	} {
		got, err := io.ReadAll(&scrubStream{ReadCloser: io.NopCloser(strings.NewReader(tc.in)), t: up})
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %v\n%q\nwant\n%q", tc.name, err, got, tc.want)
		}
	}
}

// TestScrubStreamCRLineEnds: a line of an event stream may end in CR
// alone (the SSE grammar, which the capture's decoder and the SDKs
// follow). The scrubber releases each such line as it completes — an
// event reaches the client before the upstream sends the next — and
// knows the error events of such a stream; a CRLF cut between two reads
// is one line ending, not a blank line that would end the error event
// before its data.
func TestScrubStreamCRLineEnds(t *testing.T) {
	up := &target{secret: operatorKey}
	first := "data: {\"choices\":[{\"delta\":{\"content\":\"" + openaiOrg + "\"}}]}\r\r"
	pr, pw := io.Pipe()
	s := &scrubStream{ReadCloser: pr, t: up}
	go pw.Write([]byte(first))
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 4096)
		n, _ := s.Read(b)
		got <- string(b[:n])
	}()
	select {
	case g := <-got:
		if g != first {
			t.Errorf("first read %q, want %q", g, first)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first event was held back waiting for a line feed")
	}
	pw.Close()

	in := "event: error\rdata: {\"type\":\"error\",\"message\":\"" + anthropicOrg + "\"}\r\r" +
		"event: error\r\ndata: {\"type\":\"error\",\"message\":\"" + openaiOrg + "\"}\r\n\r\n" +
		"data: {\"error\":{\"message\":\"key " + operatorKey + "\"}}\r"
	want := "event: error\rdata: {\"type\":\"error\",\"message\":\"[redacted]\"}\r\r" +
		"event: error\r\ndata: {\"type\":\"error\",\"message\":\"[redacted]\"}\r\n\r\n" +
		"data: {\"error\":{\"message\":\"key [redacted]\"}}\r"
	scrubsInPieces(t, up, in, want)
}

// TestRedactLeavesPlaceholderKeysAlone: a configured key too short to be a
// secret (what a local vLLM or Ollama is given) is not searched for in
// error messages, which it would garble; a real key is, and account ids
// go either way.
func TestRedactLeavesPlaceholderKeysAlone(t *testing.T) {
	const msg = `{"error":{"message":"This model's maximum context length is 8192 tokens (org-AbCdEf123)","code":"context_length_exceeded"}}`
	for _, tc := range []struct {
		secret, want string
	}{
		{"x", `{"error":{"message":"This model's maximum context length is 8192 tokens ([redacted])","code":"context_length_exceeded"}}`},
		{"EMPTY", `{"error":{"message":"This model's maximum context length is 8192 tokens ([redacted])","code":"context_length_exceeded"}}`},
		{"length is 8192", `{"error":{"message":"This model's maximum context [redacted] tokens ([redacted])","code":"context_length_exceeded"}}`},
	} {
		if got := string((&target{secret: tc.secret}).redact([]byte(msg))); got != tc.want {
			t.Errorf("key %q: redact = %s, want %s", tc.secret, got, tc.want)
		}
	}
}

// TestSharedKeyQuotaExhausted: with the operator's key, a 429 that says
// the account has no quota left (the operator's billing) reaches the
// tenant as a gateway 502 saying so, which the SDK does not retry; with the
// client's own key it is the provider's answer, byte for byte.
func TestSharedKeyQuotaExhausted(t *testing.T) {
	const quota = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details (organization ` + openaiOrg + `).","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	for _, shared := range []bool{true, false} {
		up := upstreamtest.New(t, withAccount(upstreamtest.JSON(429, quota)))
		g := accountGateway(t, up, shared, Deps{})
		resp, b := g.post(t, "/v1/chat/completions", simpleChat, map[string]string{"Authorization": "Bearer sk-client-own"})
		if !shared {
			if resp.StatusCode != 429 || string(b) != quota {
				t.Errorf("own key: status %d body %s, want the provider's", resp.StatusCode, b)
			}
			continue
		}
		if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Should-Retry") != "false" {
			t.Fatalf("operator's key: status %d, X-Should-Retry %q, want 502 and false: %s", resp.StatusCode, resp.Header.Get("X-Should-Retry"), b)
		}
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Code != "upstream_quota_exhausted" {
			t.Errorf("code %q (%v), want upstream_quota_exhausted: %s", e.Error.Code, err, b)
		}
		noAccount(t, resp.Header, b)
	}
}

// TestScrubStreamOversizedErrorLine: an error event's data line longer
// than the scrubber holds (maxEventLine) is never relayed as it came: it
// is replaced by the gateway's own error data, in the event's shape, which
// the capture's stream readers still take for an error; the events around
// it pass byte for byte, and the scrubber holds no more than a line's
// bound, however the stream is cut into reads.
func TestScrubStreamOversizedErrorLine(t *testing.T) {
	up := &target{secret: operatorKey}
	pad := strings.Repeat("x", maxEventLine+100)
	const before = "data: {\"choices\":[{\"delta\":{\"content\":\"" + openaiOrg + "\"}}]}\n\n"
	const after = "event: ping\ndata: {\"type\":\"ping\"}\n\n"
	for _, tc := range []struct {
		name, event, data, end string
	}{
		{"chat error", "", `{"error":{"message":"Limit of ` + openaiOrg + ` reached: ` + pad + `","type":"tokens"}}`, "\n\n"},
		{"chat error, account after the cut", "", `{"error":{"message":"` + pad + ` key ` + operatorKey + `","type":"tokens"}}`, "\r\n\r\n"},
		{"anthropic error", "event: error\n", `{"type":"error","error":{"type":"overloaded_error","message":"` + pad + anthropicOrg + `"}}`, "\r\r"},
		{"responses failed", "event: response.failed\n", `{"type":"response.failed","response":{"id":"r1","status":"failed","error":{"code":"server_error","message":"` + pad + openaiProject + `"}}}`, "\n\n"},
		{"unnamed typed error", "", `{"type":"error","message":"` + openaiOrg + pad + `"}`, "\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := before + tc.event + "data: " + tc.data + tc.end + after
			for name, r := range map[string]io.Reader{
				"whole":        strings.NewReader(in),
				"byte by byte": iotest.OneByteReader(strings.NewReader(in)),
				"halves":       iotest.HalfReader(strings.NewReader(in)),
			} {
				s := &scrubStream{ReadCloser: io.NopCloser(r), t: up}
				got, err := io.ReadAll(s)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				out := string(got)
				for _, secret := range []string{openaiOrg, operatorKey, anthropicOrg, openaiProject} {
					if strings.Count(out, secret) != strings.Count(before+after, secret) {
						t.Errorf("%s: %s relayed from the oversized error line", name, secret)
					}
				}
				rest, ok := strings.CutPrefix(out, before+tc.event)
				if !ok {
					t.Fatalf("%s: the stream before the error event was not relayed as sent: %.200q", name, out)
				}
				line, ok := strings.CutSuffix(rest, tc.end+after)
				if !ok {
					t.Fatalf("%s: the stream after the error line was not relayed as sent: %.200q", name, rest)
				}
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok || strings.ContainsAny(data, "\r\n") || len(data) > 1024 {
					t.Fatalf("%s: the error line became %.300q, want one short data line", name, line)
				}
				if tc.event == "" && !errorData([]byte(data)) || !json.Valid([]byte(data)) || !strings.Contains(data, "withheld") {
					t.Errorf("%s: the error line became %q, want the gateway's error data", name, data)
				}
				if c := cap(s.line); c > 2*maxEventLine+64<<10 {
					t.Errorf("%s: the scrubber held %d bytes of one line", name, c)
				}
			}
		})
	}
}
