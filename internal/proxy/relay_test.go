package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestUpstreamCookiesNotRelayed: the inspector (/ui) shares the gateway's
// origin and keeps its session in a cookie, so an upstream's Set-Cookie
// (or Set-Cookie2) would be set on that origin: neither reaches the client
// on any proxied route, as a header or as a trailer, and neither do an
// upstream's X-Memory-* trailers (announced or not). Other trailers pass.
func TestUpstreamCookiesNotRelayed(t *testing.T) {
	u := newHostileUpstream(t, func(c net.Conn, who string) bool {
		body := `{"who":"` + who + `"}`
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"+
			"Set-Cookie: memgate_session=evil; Path=/; HttpOnly\r\nSet-Cookie2: b=2\r\n"+
			"Trailer: X-Memory-Degraded, X-Keep\r\nTransfer-Encoding: chunked\r\n\r\n"+
			strconv.FormatInt(int64(len(body)), 16)+"\r\n"+body+"\r\n0\r\n"+
			"X-Memory-Degraded: recall\r\nX-Memory-Conversation: evil\r\nSet-Cookie: late=1\r\nX-Keep: yes\r\n\r\n")
		return true
	})
	prep := preparerFunc(func(context.Context, memory.Request) (memory.Prepared, error) {
		return memory.Prepared{}, memory.ErrUnavailable
	})
	g := mustGateway(t, upstreamtest.New(t, nil), func(c *gatewayConfig) { c.Upstream.BaseURL = u.url() },
		Deps{Resolver: identity.New(nil), Preparer: prep})
	for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
		t.Run(path, func(t *testing.T) {
			resp, b := g.post(t, path, memoryChat, map[string]string{"X-Memory-User": "alice"})
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"who"`) {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			for _, h := range []http.Header{resp.Header, resp.Trailer} {
				for k, v := range h {
					if k == "Set-Cookie" || k == "Set-Cookie2" || (isMemoryHeader(k) && v != nil && v[0] == "evil") {
						t.Errorf("client got %s: %q", k, v)
					}
				}
			}
			if got := resp.Trailer.Get("X-Memory-Degraded"); got == "recall" {
				t.Errorf("client got the upstream's X-Memory-Degraded trailer")
			}
			if got := resp.Trailer.Get("X-Keep"); got != "yes" {
				t.Errorf("trailer X-Keep = %q, want yes (trailers %v)", got, resp.Trailer)
			}
		})
	}
}

// TestOutgoingHeadersAfterBodyRead: memgate reads a memory route's body
// itself (and the Go server answered the client's Expect: 100-continue
// then), so the upstream request carries no Expect — else the upstream's
// own 100 reached the client as a second one, and the transport waited for
// a 100 an upstream may never send; and the body memgate writes goes with
// its Content-Type even when the client's Connection header names it.
func TestOutgoingHeadersAfterBodyRead(t *testing.T) {
	up := upstreamtest.New(t, nil)
	g := mustGateway(t, up, nil, Deps{Resolver: identity.New(nil), Preparer: injecting(make(chan memory.Request, 1))})
	req, err := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(memoryChat))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Expect", "100-continue")
	req.Header.Set("Connection", "Content-Type")
	req.Header.Set("X-Memory-User", "alice")
	var continues atomic.Int32
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
			continues.Add(1)
			return nil
		},
	}))
	resp, b := do(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	sent := up.Last(t)
	if v := sent.Header.Values("Expect"); len(v) != 0 {
		t.Errorf("upstream got Expect: %q", v)
	}
	if n := continues.Load(); n > 1 {
		t.Errorf("client got %d informational responses, want at most one", n)
	}
	if ct := sent.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("upstream got Content-Type %q, want application/json", ct)
	}
}
