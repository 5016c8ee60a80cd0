package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// encodedAPI is one API's exchange, as an upstream answers it whole and
// streamed.
type encodedAPI struct {
	name, path   string
	whole        string // the request, without stream
	streamed     string // the request, with "stream": true
	reply        string // the whole JSON reply
	events       []string
	terminal     string // the line starting the terminal event
	wantContent  string // the captured reply's content
	wantStreamed string // the captured streamed reply's content
}

var encodedAPIs = []encodedAPI{
	{
		name: "chat", path: "/v1/chat/completions",
		whole:    `{"model":"gpt-4o","messages":[{"role":"user","content":"What is 6 times 7?"}]}`,
		streamed: `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"What is 6 times 7?"}]}`,
		reply:    string(upstreamtest.Completion("gpt-4o", upstreamtest.Reply{Content: "Forty-two."})),
		events: []string{
			"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Forty\"}}]}\n\n",
			"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"-two.\"},\"finish_reason\":\"stop\"}]}\n\n",
			"data: [DONE]\n\n",
		},
		terminal: "data: [DONE]", wantContent: "Forty-two.", wantStreamed: "Forty-two.",
	},
	{
		name: "anthropic", path: "/v1/messages",
		whole:    `{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"What is 6 times 7?"}]}`,
		streamed: `{"model":"claude-sonnet-4-6","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"What is 6 times 7?"}]}`,
		reply: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[{"type":"text","text":"Forty-two."}],` +
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":3}}`,
		events: []string{
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-6\",\"usage\":{\"input_tokens\":5,\"output_tokens\":0}}}\n\n",
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Forty\"}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"-two.\"}}\n\n",
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}\n\n",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		},
		terminal: "event: message_stop", wantContent: "Forty-two.", wantStreamed: "Forty-two.",
	},
	{
		name: "responses", path: "/v1/responses",
		whole:    `{"model":"gpt-4o","input":"What is 6 times 7?"}`,
		streamed: `{"model":"gpt-4o","stream":true,"input":"What is 6 times 7?"}`,
		reply: `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"msg_1","role":"assistant",` +
			`"content":[{"type":"output_text","text":"Forty-two."}]}]}`,
		events: []string{
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n",
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[]}}\n\n",
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Forty\"}\n\n",
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"-two.\"}\n\n",
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"output\":[{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Forty-two.\"}]}]}}\n\n",
		},
		terminal: "event: response.completed", wantContent: "Forty-two.", wantStreamed: "Forty-two.",
	},
}

// flushedEvents is an upstream that streams events, flushing after each.
func flushedEvents(events []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for _, e := range events {
			io.WriteString(w, e)
			rc.Flush()
		}
	})
}

// plainClient is a client that asks for no encoding and decodes none: it
// sees the bytes the gateway relays.
var plainClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// postPlain posts body to the gateway's path as a memory request of alice's
// conversation c1 through plainClient, and returns the response, read
// whole.
func (g *gateway) postPlain(tb testing.TB, path, body string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, g.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Memory-User", "alice")
	req.Header.Set("X-Memory-Conversation", "c1")
	resp, err := plainClient.Do(req)
	if err != nil {
		tb.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("read body: %v", err)
	}
	return resp, b
}

// encodedGateway is a memory gateway in front of an upstream serving h for
// every API, with captures sent to the returned channel.
func encodedGateway(t *testing.T, h http.Handler) (*gateway, chanCapturer) {
	t.Helper()
	captured := make(chanCapturer, 4)
	up := upstreamtest.New(t, h)
	g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.Anthropic.BaseURL = up.URL() },
		Deps{Resolver: identity.New(nil), Capturer: captured})
	return g, captured
}

// noMoreCaptures fails when a capture is waiting in captured.
func noMoreCaptures(t *testing.T, captured chanCapturer) {
	t.Helper()
	select {
	case ex := <-captured:
		t.Fatalf("unexpected capture, reply %s", ex.Reply.Raw)
	default:
	}
}

// TestEncodedWholeReplyCaptured: a whole JSON reply an upstream compressed
// unasked (gzip, x-gzip, deflate as zlib or bare) is captured once, and
// relayed decoded, its Content-Encoding gone, to a client that never
// asked for an encoding.
func TestEncodedWholeReplyCaptured(t *testing.T) {
	for _, a := range encodedAPIs {
		for _, enc := range []string{"gzip", "x-gzip", "deflate", "deflate-raw"} {
			t.Run(a.name+"/"+enc, func(t *testing.T) {
				g, captured := encodedGateway(t, upstreamtest.Encoded(enc, upstreamtest.JSON(http.StatusOK, a.reply)))
				resp, got := g.postPlain(t, a.path, a.whole)
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %q", resp.StatusCode, got)
				}
				if ce := resp.Header.Get("Content-Encoding"); ce != "" {
					t.Fatalf("relayed with Content-Encoding %q, want the decoded reply", ce)
				}
				if !jsonEqual(t, got, []byte(a.reply)) {
					t.Fatalf("relayed %s, want %s", got, a.reply)
				}
				ex := wait(t, captured, "capture")
				if ex.Reply.Content != a.wantContent {
					t.Fatalf("captured reply %q, want %q (raw %s)", ex.Reply.Content, a.wantContent, ex.Reply.Raw)
				}
				if len(ex.Turn) != 1 || ex.Turn[0].Content != "What is 6 times 7?" {
					t.Fatalf("turn %+v, want the user's question", ex.Turn)
				}
				noMoreCaptures(t, captured)
				if m := g.metrics(t); strings.Contains(m, "memgate_capture_skipped_total{") {
					t.Fatalf("a capture was skipped:\n%s", grepLines(m, "memgate_capture_skipped_total"))
				}
			})
		}
	}
}

// heldCapturer records, when it is handed an exchange, what the client had
// read of the stream by then.
type heldCapturer struct {
	mu      sync.Mutex
	read    *bytes.Buffer
	seen    chan string
	capture chanCapturer
}

func (h *heldCapturer) Capture(ctx context.Context, ex memory.Exchange) bool {
	h.mu.Lock()
	h.seen <- h.read.String()
	h.mu.Unlock()
	return h.capture.Capture(ctx, ex)
}

// TestEncodedStreamCaptured: an event stream an upstream compressed
// unasked, flushed an event at a time, is relayed decoded, byte for byte
// as the upstream's events, and captured once; its terminal event still
// reaches the client only once the exchange was handed to the Capturer.
func TestEncodedStreamCaptured(t *testing.T) {
	for _, a := range encodedAPIs {
		for _, enc := range []string{"gzip", "deflate"} {
			t.Run(a.name+"/"+enc, func(t *testing.T) {
				read := &bytes.Buffer{}
				hc := &heldCapturer{read: read, seen: make(chan string, 4), capture: make(chanCapturer, 4)}
				up := upstreamtest.New(t, upstreamtest.Encoded(enc, flushedEvents(a.events)))
				g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.Anthropic.BaseURL = up.URL() },
					Deps{Resolver: identity.New(nil), Capturer: hc})
				req, _ := http.NewRequest(http.MethodPost, g.URL+a.path, strings.NewReader(a.streamed))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Memory-User", "alice")
				req.Header.Set("X-Memory-Conversation", "c1")
				resp, err := plainClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" {
					t.Fatalf("status %d, Content-Encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
				}
				buf := make([]byte, 512)
				for {
					n, err := resp.Body.Read(buf)
					hc.mu.Lock()
					read.Write(buf[:n])
					hc.mu.Unlock()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("read stream: %v", err)
					}
				}
				if want := strings.Join(a.events, ""); read.String() != want {
					t.Fatalf("relayed %q, want the upstream's events decoded %q", read.String(), want)
				}
				if seen := wait(t, hc.seen, "capture"); strings.Contains(seen, a.terminal) {
					t.Fatalf("the client read the terminal event before the exchange was stored: %q", seen)
				}
				ex := wait(t, hc.capture, "capture")
				if ex.Reply.Content != a.wantStreamed {
					t.Fatalf("captured reply %q, want %q (raw %s)", ex.Reply.Content, a.wantStreamed, ex.Reply.Raw)
				}
				noMoreCaptures(t, hc.capture)
			})
		}
	}
}

// TestEncodedStreamFlushedPerEvent: a compressed stream is decoded as it
// arrives: each event reaches the client while the upstream still holds
// the next.
func TestEncodedStreamFlushedPerEvent(t *testing.T) {
	feed := upstreamtest.NewFeed()
	g, captured := encodedGateway(t, upstreamtest.Encoded("gzip", feed))
	resp := g.streamRequest(t, context.Background(), map[string]string{"X-Memory-User": "alice", "X-Memory-Conversation": "c1"})
	br := bufio.NewReader(resp.Body)
	for _, e := range []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":"Forty"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"-two"},"finish_reason":"stop"}]}`,
	} {
		feed.Send(t, e)
		if got := readEvent(t, br); got != "data: "+e+"\n" {
			t.Fatalf("event %q, want data: %s", got, e)
		}
	}
	feed.End(t)
	if got := readEvent(t, br); got != "data: [DONE]\n" {
		t.Fatalf("last event %q, want [DONE]", got)
	}
	if ex := wait(t, captured, "capture"); ex.Reply.Content != "Forty-two" {
		t.Fatalf("captured %q", ex.Reply.Content)
	}
}

// gzipped compresses b.
func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// gzipBomb is a gzip body of n MiB of zeros (concatenated members, which a
// gzip reader reads as one stream) of about a thousandth of that size.
func gzipBomb(n int) []byte {
	return bytes.Repeat(gzipped(make([]byte, 1<<20)), n)
}

// rawEncoded is an upstream answering status with body as it is, said to
// be encoded with enc, in the content type ct.
func rawEncoded(ct, enc string, body []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Content-Encoding", enc)
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	})
}

// TestEncodedWholeReplyNotDecodable: a whole reply the gateway cannot
// decode within the capture cap — corrupt gzip, a bomb of 1 GiB of zeros,
// an encoding it does not know — is relayed as the upstream sent it,
// encoding and all (what the client got before), and not stored, counted
// by reason.
func TestEncodedWholeReplyNotDecodable(t *testing.T) {
	chat := encodedAPIs[0]
	good := gzipped([]byte(chat.reply))
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)/2] ^= 0xff
	tests := []struct {
		name, enc string
		body      []byte
		reason    string
	}{
		{"corrupt gzip", "gzip", corrupt, skipUnreadable},
		{"truncated gzip", "gzip", good[:len(good)-6], skipUnreadable},
		{"not gzip at all", "gzip", []byte(chat.reply), skipUnreadable},
		{"gzip bomb", "gzip", gzipBomb(1024), skipTooLarge},
		{"brotli", "br", []byte{0x0b, 0x02, 0x80, 0x7b, 0x7d, 0x03}, skipUnreadable},
		{"stacked encodings", "gzip, gzip", gzipped(good), skipUnreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, captured := encodedGateway(t, rawEncoded("application/json", tt.enc, tt.body))
			resp, got := g.postPlain(t, chat.path, chat.whole)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != tt.enc || !bytes.Equal(got, tt.body) {
				t.Fatalf("status %d, Content-Encoding %q, %d bytes: want the upstream's %d bytes as sent",
					resp.StatusCode, resp.Header.Get("Content-Encoding"), len(got), len(tt.body))
			}
			g.waitMetric(t, `memgate_capture_skipped_total{reason="`+tt.reason+`"} 1`)
			noMoreCaptures(t, captured)
		})
	}
}

// TestEncodedStreamNotDecodable: a compressed event stream that breaks
// (corrupt mid-stream) is relayed decoded as far as it decodes, then
// aborted (a 502 to the exchange's record), its capture given up as
// unreadable; a bomb is relayed decoded like a plain stream of its size, the
// capture giving up at its cap. Neither is stored, nor panics.
func TestEncodedStreamNotDecodable(t *testing.T) {
	chat := encodedAPIs[0]
	first := chat.events[0]
	var good bytes.Buffer
	zw := gzip.NewWriter(&good)
	io.WriteString(zw, first)
	zw.Flush()
	cut := good.Len()
	io.WriteString(zw, chat.events[1]+chat.events[2])
	zw.Close()
	corrupt := bytes.Clone(good.Bytes())
	for i := cut + 2; i < len(corrupt)-8; i++ {
		corrupt[i] ^= 0x5a
	}
	// A bomb: one event, then a comment line of 64 MiB of zeros'
	// worth, then the rest of the stream.
	var bomb bytes.Buffer
	zw = gzip.NewWriter(&bomb)
	io.WriteString(zw, first+": ")
	zeros := bytes.Repeat([]byte("0"), 1<<20)
	for range 64 {
		zw.Write(zeros)
	}
	io.WriteString(zw, "\n\n"+chat.events[1]+chat.events[2])
	zw.Close()

	t.Run("corrupt", func(t *testing.T) {
		g, captured := encodedGateway(t, rawEncoded("text/event-stream", "gzip", corrupt))
		req, _ := http.NewRequest(http.MethodPost, g.URL+chat.path, strings.NewReader(chat.streamed))
		req.Header.Set("X-Memory-User", "alice")
		req.Header.Set("Content-Type", "application/json")
		resp, err := plainClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err == nil {
			t.Errorf("the client read a clean end of a stream that broke: %q", got)
		}
		if !strings.HasPrefix(string(got), first) || strings.Contains(string(got), "[DONE]") {
			t.Fatalf("relayed %q, want the first event and no end", got)
		}
		g.waitMetric(t, `memgate_http_requests_total{route="chat",status="502"} 1`)
		g.waitMetric(t, `memgate_capture_skipped_total{reason="unreadable"} 1`)
		noMoreCaptures(t, captured)
	})
	t.Run("bomb", func(t *testing.T) {
		g, captured := encodedGateway(t, rawEncoded("text/event-stream", "gzip", bomb.Bytes()))
		resp, got := g.postPlain(t, chat.path, chat.streamed)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" {
			t.Fatalf("status %d, Content-Encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
		}
		if len(got) != len(first)+2+64<<20+2+len(chat.events[1])+len(chat.events[2]) || !strings.HasSuffix(string(got), "data: [DONE]\n\n") {
			t.Fatalf("relayed %d bytes ending %q, want the whole decoded stream", len(got), got[max(0, len(got)-40):])
		}
		g.waitMetric(t, `memgate_capture_skipped_total{reason="too_large"} 1`)
		noMoreCaptures(t, captured)
	})
}

// TestSharedKeyEncodedRepliesScrubbed: with the operator's key, what the
// gateway reads to leave the operator's account out — an error body, a
// stream's error event, the model list — is read through an encoding the
// upstream sent unasked: the error keeps its message with the ids
// redacted (not withheld), the stream's error event is redacted, the
// operator's own models are left out; each relayed decoded.
func TestSharedKeyEncodedRepliesScrubbed(t *testing.T) {
	t.Run("error body", func(t *testing.T) {
		up := upstreamtest.New(t, withAccount(upstreamtest.Encoded("gzip", upstreamtest.JSON(429, openai429))))
		g := accountGateway(t, up, true, Deps{})
		req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(simpleChat))
		req.Header.Set("Content-Type", "application/json")
		resp, err := plainClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		want := strings.ReplaceAll(openai429, openaiOrg, redacted)
		if resp.StatusCode != 429 || resp.Header.Get("Content-Encoding") != "" || string(b) != want {
			t.Fatalf("status %d, Content-Encoding %q, body %s\nwant 429 %s", resp.StatusCode, resp.Header.Get("Content-Encoding"), b, want)
		}
		noAccount(t, resp.Header, b)
	})
	t.Run("stream error event", func(t *testing.T) {
		const before = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"}}]}\n\n"
		fault := "data: {\"error\":{\"message\":\"Rate limit reached in organization " + openaiOrg + ".\",\"type\":\"tokens\"}}\n\n"
		captured := make(chanCapturer, 1)
		up := upstreamtest.New(t, upstreamtest.Encoded("gzip", flushedEvents([]string{before, fault})))
		g := accountGateway(t, up, true, Deps{Resolver: identity.New(nil), Capturer: captured})
		resp, got := g.postPlain(t, "/v1/chat/completions", streamingChat)
		if want := before + strings.ReplaceAll(fault, openaiOrg, redacted); resp.StatusCode != 200 || string(got) != want {
			t.Fatalf("status %d, relayed %q\nwant %q", resp.StatusCode, got, want)
		}
		if ex := wait(t, captured, "capture"); !ex.Reply.Failed() {
			t.Errorf("captured reply %s, want it marked failed", ex.Reply.Raw)
		}
	})
	t.Run("model list", func(t *testing.T) {
		up := upstreamtest.New(t, upstreamtest.Encoded("deflate", modelsUpstream()))
		g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.APIKey = operatorKey }, Deps{})
		req, _ := http.NewRequest(http.MethodGet, g.URL+"/v1/models", nil)
		resp, err := plainClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var list struct {
			Data []struct {
				ID string `json:"id"`
			}
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" || json.Unmarshal(b, &list) != nil {
			t.Fatalf("status %d, Content-Encoding %q: %s", resp.StatusCode, resp.Header.Get("Content-Encoding"), b)
		}
		var ids []string
		for _, m := range list.Data {
			ids = append(ids, m.ID)
		}
		slices.Sort(ids)
		if want := []string{"gpt-4o", "gpt-4o-mini", "meta-llama/Llama-3.1-8B"}; !slices.Equal(ids, want) {
			t.Fatalf("listed %q, want %q", ids, want)
		}
	})
}

// TestEncodedFileContentRelayedAsSent: a file's content, which the
// gateway never reads, goes byte for byte as the upstream sent it, its
// Content-Encoding included, though the gateway asked for no encoding.
func TestEncodedFileContentRelayedAsSent(t *testing.T) {
	gz := gzipped([]byte("a,b\n1,2\n"))
	up := filesUpstream(t, upstreamtest.File{ID: "file_gz", Filename: "t.csv", MimeType: "text/csv", Size: int64(len(gz)),
		Body: func(w http.ResponseWriter) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gz)
		}})
	states := newFakeStates()
	states.owner[memory.ProviderState{Kind: memory.StateFile, ID: "file_gz"}] = "a/bob"
	g := anthropicGateway(t, up, states)
	resp, err := plainClient.Do(fileRequest(t, g, http.MethodGet, "/v1/files/file_gz/content", "bob"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(got, gz) {
		t.Fatalf("status %d, Content-Encoding %q, body %q (%v): want the upstream's bytes as sent", resp.StatusCode, resp.Header.Get("Content-Encoding"), got, err)
	}
}
