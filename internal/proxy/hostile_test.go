package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// hostileUpstream is a raw TCP upstream that answers each request with the
// bytes its behave function writes. It parses requests with net/http (the
// gateway's framing is not what is under test here) and records the
// X-Request-Id of every request it read.
type hostileUpstream struct {
	ln     net.Listener
	behave func(c net.Conn, who string) (keep bool)
	mu     sync.Mutex
	seen   map[string]int
	// closed receives once per connection that ended (closed by either
	// side).
	closed chan struct{}
}

func newHostileUpstream(tb testing.TB, behave func(c net.Conn, who string) bool) *hostileUpstream {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	u := &hostileUpstream{ln: ln, behave: behave, seen: map[string]int{}, closed: make(chan struct{}, 1000)}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go u.serve(c)
		}
	}()
	return u
}

func (u *hostileUpstream) serve(c net.Conn) {
	defer func() {
		c.Close()
		u.closed <- struct{}{}
	}()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		u.mu.Lock()
		u.seen[req.Header.Get("X-Request-Id")]++
		u.mu.Unlock()
		if !u.behave(c, req.Header.Get("X-Who")) {
			return
		}
	}
}

func (u *hostileUpstream) url() string { return "http://" + u.ln.Addr().String() + "/v1" }

// answer is a complete response whose body names who.
func answer(who string) string {
	body := `{"who":"` + who + `"}`
	return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// TestHostileUpstream: an upstream that breaks HTTP/1.1 never makes one
// client receive another's answer (or a stray one), and no request is sent
// upstream twice. Two clients, A and B, alternate; the upstream misbehaves
// on every answer, or on B's only, as each case says.
func TestHostileUpstream(t *testing.T) {
	tests := []struct {
		name string
		// behave writes the answer to who's request; false closes the
		// connection.
		behave func(c net.Conn, who string) bool
		// hostileB: B gets an error (502), A its answer; else both get
		// their answers.
		hostileB bool
	}{
		{"body longer than its Content-Length", func(c net.Conn, who string) bool {
			io.WriteString(c, answer(who)+answer("intruder"))
			return true
		}, false},
		{"unsolicited response after a delay", func(c net.Conn, who string) bool {
			io.WriteString(c, answer(who))
			time.Sleep(20 * time.Millisecond)
			io.WriteString(c, answer("intruder"))
			return true
		}, false},
		{"huge response head", func(c net.Conn, who string) bool {
			if who == "B" {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 2<<20)+"\r\nContent-Length: 2\r\n\r\n{}")
				return false
			}
			io.WriteString(c, answer(who))
			return true
		}, true},
		{"1xx storm", func(c net.Conn, who string) bool {
			if who == "B" {
				io.WriteString(c, strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n", 50)+answer("intruder"))
				return true
			}
			io.WriteString(c, answer(who))
			return true
		}, true},
		{"close after reading the request", func(c net.Conn, who string) bool {
			if who == "B" {
				return false
			}
			io.WriteString(c, answer(who))
			return true
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newHostileUpstream(t, tt.behave)
			g := mustGateway(t, upstreamtest.New(t, nil), func(c *gatewayConfig) {
				c.Upstream.BaseURL = u.url()
				c.Upstream.Retries = 2
			}, Deps{})
			clients := map[string]*http.Client{"A": {Transport: &http.Transport{}}, "B": {Transport: &http.Transport{}}}
			for round := range 4 {
				for _, who := range []string{"A", "B"} {
					id := fmt.Sprintf("%s-%d", who, round)
					req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(simpleChat))
					req.Header.Set("X-Who", who)
					req.Header.Set("X-Request-Id", id)
					resp, err := clients[who].Do(req)
					if err != nil {
						t.Fatalf("%s: %v", id, err)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					wantErr := tt.hostileB && who == "B"
					switch {
					case wantErr && resp.StatusCode != http.StatusBadGateway:
						t.Errorf("%s: status %d, want 502: %s", id, resp.StatusCode, b)
					case !wantErr && (resp.StatusCode != 200 || string(b) != `{"who":"`+who+`"}`):
						t.Errorf("%s: got %d %s, want its own answer", id, resp.StatusCode, b)
					}
					if !tt.hostileB || who == "B" {
						// The connection the upstream broke is dropped before
						// anyone else's request could use it.
						wait(t, u.closed, id+"'s upstream connection to close")
					}
				}
			}
			u.mu.Lock()
			defer u.mu.Unlock()
			for id, n := range u.seen {
				if n != 1 {
					t.Errorf("request %s reached the upstream %d times", id, n)
				}
			}
			if len(u.seen) != 8 {
				t.Errorf("upstream read %d requests, want 8: %v", len(u.seen), u.seen)
			}
		})
	}
}

// TestPassthroughRelaysFinalStatusAfter1xx: an upstream's informational
// responses do not become the client's status.
func TestPassthroughRelaysFinalStatusAfter1xx(t *testing.T) {
	u := newHostileUpstream(t, func(c net.Conn, who string) bool {
		body := `{"id":"file-1"}`
		io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"+
			"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		return true
	})
	g := mustGateway(t, upstreamtest.New(t, nil), func(c *gatewayConfig) { c.Upstream.BaseURL = u.url() }, Deps{})
	resp, b := g.post(t, "/v1/files", `{}`, nil)
	if resp.StatusCode != http.StatusCreated || string(b) != `{"id":"file-1"}` {
		t.Errorf("got %d %s, want the upstream's 201 and body", resp.StatusCode, b)
	}
}

// TestGatewayHeadersSurvive1xx: an upstream's informational response
// (103 Early Hints) before its answer leaves the gateway's own response
// headers in place: the reverse proxy clears the client's header map after
// relaying a 1xx, which took X-Request-Id, X-Memory-Conversation and
// X-Memory-Degraded (a memory failure reported by the header the contract
// names) off the final answer, on the memory routes and passthrough alike.
func TestGatewayHeadersSurvive1xx(t *testing.T) {
	u := newHostileUpstream(t, func(c net.Conn, who string) bool {
		io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"+answer(who))
		return true
	})
	prep := preparerFunc(func(context.Context, memory.Request) (memory.Prepared, error) {
		return memory.Prepared{}, memory.ErrUnavailable
	})
	g := mustGateway(t, upstreamtest.New(t, nil), func(c *gatewayConfig) { c.Upstream.BaseURL = u.url() },
		Deps{Resolver: identity.New(nil), Preparer: prep})
	tests := []struct {
		name, path string
		header     map[string]string
		want       map[string]string
	}{
		{"memory", "/v1/chat/completions", map[string]string{"X-Memory-User": "alice", "X-Memory-Conversation": "c1", "X-Request-Id": "r-1"},
			map[string]string{"X-Request-Id": "r-1", "X-Memory-Conversation": "c1", "X-Memory-Degraded": "store"}},
		{"passthrough", "/v1/embeddings", map[string]string{"X-Request-Id": "r-2"}, map[string]string{"X-Request-Id": "r-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := g.post(t, tt.path, memoryChat, tt.header)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			for k, v := range tt.want {
				if got := resp.Header.Values(k); len(got) != 1 || got[0] != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestUpstreamMemoryHeadersNotRelayed: X-Memory-* response headers are the
// gateway's own vocabulary, as the request's are (never sent upstream). An
// upstream that answers with its own — a memgate chained behind this one,
// or a hostile provider — does not reach the client beside or instead of
// the gateway's: a second X-Memory-Conversation (which clients join with a
// comma and send back, a 400), an X-Memory-Degraded reporting a failure
// that did not happen, token counts of another prompt.
func TestUpstreamMemoryHeadersNotRelayed(t *testing.T) {
	u := newHostileUpstream(t, func(c net.Conn, who string) bool {
		body := `{"who":"` + who + `"}`
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"+
			"X-Memory-Conversation: evil\r\nX-Memory-Degraded: recall\r\nX-Memory-Tokens-Sent: 1\r\nx-memory-user: mallory\r\n"+
			"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		return true
	})
	prep := preparerFunc(func(context.Context, memory.Request) (memory.Prepared, error) {
		return memory.Prepared{}, memory.ErrUnavailable
	})
	g := mustGateway(t, upstreamtest.New(t, nil), func(c *gatewayConfig) { c.Upstream.BaseURL = u.url() },
		Deps{Resolver: identity.New(nil), Preparer: prep})
	tests := []struct {
		name, path string
		header     map[string]string
		want       map[string]string // the X-Memory-* headers the client gets, each once
	}{
		{"memory", "/v1/chat/completions", map[string]string{"X-Memory-User": "alice", "X-Memory-Conversation": "c1"},
			map[string]string{"X-Memory-Conversation": "c1", "X-Memory-Degraded": "store"}},
		{"passthrough", "/v1/embeddings", nil, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := g.post(t, tt.path, memoryChat, tt.header)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			for k, vs := range resp.Header {
				if !isMemoryHeader(k) {
					continue
				}
				if want, ok := tt.want[k]; !ok || len(vs) != 1 || vs[0] != want {
					t.Errorf("%s: %q, want %q", k, vs, tt.want[k])
				}
			}
			for k, v := range tt.want {
				if got := resp.Header.Values(k); len(got) != 1 || got[0] != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestUpstreamMemoryHeadersNotRelayedIn1xx: an upstream's informational
// response (103 Early Hints) is relayed with its headers, but not with
// those only the gateway may send (dropUpstreamOwn): its X-Memory-* and
// its cookies stay out of the 1xx as they stay out of the final answer.
func TestUpstreamMemoryHeadersNotRelayedIn1xx(t *testing.T) {
	u := newHostileUpstream(t, func(c net.Conn, who string) bool {
		io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\nSet-Cookie: memgate_session=evil; Path=/\r\n"+
			"X-Memory-Conversation: evil\r\nX-Memory-Degraded: recall\r\n\r\n"+answer(who))
		return true
	})
	prep := preparerFunc(func(context.Context, memory.Request) (memory.Prepared, error) {
		return memory.Prepared{}, memory.ErrUnavailable
	})
	g := mustGateway(t, upstreamtest.New(t, nil), func(c *gatewayConfig) { c.Upstream.BaseURL = u.url() },
		Deps{Resolver: identity.New(nil), Preparer: prep})
	for _, tt := range []struct {
		name, path string
		header     map[string]string
	}{
		{"memory", "/v1/chat/completions", map[string]string{"X-Memory-User": "alice", "X-Memory-Conversation": "c1"}},
		{"passthrough", "/v1/embeddings", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, g.URL+tt.path, strings.NewReader(memoryChat))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			var mu sync.Mutex
			var interim []http.Header
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					mu.Lock()
					defer mu.Unlock()
					interim = append(interim, http.Header(h).Clone())
					return nil
				},
			}))
			resp, b := do(t, req)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(interim) != 1 || interim[0].Get("Link") != "</a>" {
				t.Fatalf("interim responses %v, want the 103 with its Link", interim)
			}
			for k, v := range interim[0] {
				if isMemoryHeader(k) || k == "Set-Cookie" {
					t.Errorf("the 103 carried %s: %q", k, v)
				}
			}
			if v := resp.Header.Values("Set-Cookie"); len(v) != 0 {
				t.Errorf("the answer carried Set-Cookie %q", v)
			}
		})
	}
}

// TestStreamEndedBeforeItsEndNotStored: an upstream that stops mid-answer
// but ends its body cleanly (the chunked terminator: a provider's own
// upstream died behind it) has the stream relayed as it came, and on every
// API the exchange is not stored as if the answer were whole: a chat
// stream with neither [DONE] nor a finish_reason, an Anthropic one without
// message_stop, a Responses one without response.completed are counted as
// unreadable captures, and nothing reaches the Capturer.
func TestStreamEndedBeforeItsEndNotStored(t *testing.T) {
	tests := []struct{ name, path, body, stream string }{
		{"chat", "/v1/chat/completions",
			`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"What is 6 times 7?"}]}`,
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"It is \"}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"forty\"}}]}\n\n"},
		{"anthropic", "/v1/messages",
			`{"model":"claude-sonnet-4-6","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"What is 6 times 7?"}]}`,
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"c\",\"usage\":{\"input_tokens\":5,\"output_tokens\":0}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"It is \"}}\n\n"},
		{"responses", "/v1/responses",
			`{"model":"gpt-4o","stream":true,"input":"What is 6 times 7?"}`,
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
				"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"o1\",\"role\":\"assistant\",\"content\":[]}}\n\n" +
				"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"It is \"}\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, captured := relayScripted(t, tc.path, tc.body, tc.stream)
			// A stream is captured or given up before the client sees
			// its end.
			select {
			case ex := <-captured:
				t.Fatalf("a stream cut off before its end was captured: reply %s", ex.Reply.Raw)
			default:
			}
			g.waitMetric(t, `memgate_capture_skipped_total{reason="unreadable"} 1`)
		})
	}
}
