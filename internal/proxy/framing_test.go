package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/upstreamtest"
)

// echoLength answers every request with 200 and the length of the body it
// received.
var echoLength = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	io.WriteString(w, "got "+strconv.Itoa(len(b))+" bytes: "+string(b))
})

// sentinel ends every raw exchange: a request both servers answer the same
// way, after which they close the connection. (Half-closing instead would
// read, to net/http, as the client going away.)
const sentinel = "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

// exchanges sends raw and the sentinel on a new connection to addr and
// returns each response read, up to the connection's end, as its status
// and, for a 2xx, the body (what the echo saw; error bodies differ in
// shape between memgate and net/http).
func exchanges(tb testing.TB, addr, raw string) []string {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// The write may fail when the server rejects raw and closes first.
	io.WriteString(c, raw+sentinel)
	br := bufio.NewReader(c)
	var out []string
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return out
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			b = nil
		}
		out = append(out, strconv.Itoa(resp.StatusCode)+" "+string(b))
	}
}

// TestFramingMatchesNetHTTP sends the same raw requests to memgate's
// listener (a pass-through route, whose upstream echoes what it received)
// and to a plain net/http server running the same echo: where each request
// ends, and so which requests exist and what bodies they carry, must be
// decided the same way. A request smuggled past one of them would show as
// an extra or different answer.
func TestFramingMatchesNetHTTP(t *testing.T) {
	up := upstreamtest.New(t, echoLength)
	g := mustGateway(t, up, nil, Deps{})
	plain := httptest.NewServer(echoLength)
	t.Cleanup(plain.Close)

	const body = `{"input":"hi","model":"m"}`
	smuggled := "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nEVIL!"
	req := func(head, body string) string {
		return "POST /v1/embeddings HTTP/1.1\r\n" + head + "\r\n" + body
	}
	cl := func(n int) string { return "Content-Length: " + strconv.Itoa(n) + "\r\n" }
	chunked := "Transfer-Encoding: chunked\r\n"
	tests := []struct{ name, raw string }{
		{"plain", req("Host: x\r\n"+cl(len(body)), body)},
		{"pipelined", req("Host: x\r\n"+cl(len(body)), body) + req("Host: x\r\n"+cl(2), "{}")},
		{"Content-Length and Transfer-Encoding", req("Host: x\r\n"+cl(4)+chunked, "5\r\nhello\r\n0\r\n\r\n")},
		{"Transfer-Encoding then Content-Length", req("Host: x\r\n"+chunked+cl(len(smuggled)+5), "0\r\n\r\n"+smuggled)},
		{"space before colon in Content-Length", req("Host: x\r\nContent-Length : "+strconv.Itoa(len(smuggled))+"\r\n", smuggled)},
		{"space before colon in Transfer-Encoding", req("Host: x\r\n"+cl(3)+"Transfer-Encoding : chunked\r\n", "0\r\n\r\n"+smuggled)},
		{"tab in name", req("Host: x\r\nContent-Length\t: 2\r\n", "{}")},
		{"control byte in name", req("Host: x\r\nContent\x01Length: 2\r\n", "{}")},
		{"non-ASCII in name", req("Host: x\r\nContent-Léngth: 2\r\n", "{}")},
		{"duplicate equal lengths", req("Host: x\r\n"+cl(2)+cl(2), "{}")},
		{"duplicate different lengths", req("Host: x\r\n"+cl(2)+cl(len(smuggled)+2), "{}"+smuggled)},
		{"comma-joined lengths", req("Host: x\r\nContent-Length: 2, 2\r\n", "{}")},
		{"signed length", req("Host: x\r\nContent-Length: +2\r\n", "{}")},
		{"chunk size in hex", req("Host: x\r\n"+chunked, "a\r\n0123456789\r\n0\r\n\r\n")},
		{"chunk size 0x prefix", req("Host: x\r\n"+chunked, "0x2\r\n{}\r\n0\r\n\r\n")},
		{"chunk size with extension", req("Host: x\r\n"+chunked, "2;ext=1\r\n{}\r\n0\r\n\r\n")},
		{"chunk size with leading space", req("Host: x\r\n"+chunked, " 2\r\n{}\r\n0\r\n\r\n")},
		{"chunk size signed", req("Host: x\r\n"+chunked, "+2\r\n{}\r\n0\r\n\r\n")},
		{"chunk size overflow", req("Host: x\r\n"+chunked, "fffffffffffffffff\r\n{}\r\n0\r\n\r\n")},
		{"chunk without CRLF", req("Host: x\r\n"+chunked, "2\n{}\n0\n\n")},
		{"chunked not last", req("Host: x\r\nTransfer-Encoding: chunked, identity\r\n", "2\r\n{}\r\n0\r\n\r\n")},
		{"unknown transfer coding", req("Host: x\r\nTransfer-Encoding: xchunked\r\n", "2\r\n{}\r\n0\r\n\r\n")},
		{"obsolete line folding", req("Host: x\r\nContent-Length: 2\r\n 0\r\n", "{}")},
		{"missing Host", req(cl(2), "{}")},
		{"two Hosts", req("Host: x\r\nHost: y\r\n"+cl(2), "{}")},
		{"Host with space", req("Host: a b\r\n"+cl(2), "{}")},
		{"Host with bad byte", req("Host: a\x7fb\r\n"+cl(2), "{}")},
		{"bare LF line endings", "POST /v1/embeddings HTTP/1.1\nHost: x\nContent-Length: 2\n\n{}"},
		{"HTTP/1.0 without length", "POST /v1/embeddings HTTP/1.0\r\nHost: x\r\n\r\n{}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := exchanges(t, strings.TrimPrefix(plain.URL, "http://"), tt.raw)
			got := exchanges(t, strings.TrimPrefix(g.URL, "http://"), tt.raw)
			if len(got) != len(want) {
				t.Fatalf("memgate answered %d requests, net/http %d:\nmemgate  %q\nnet/http %q", len(got), len(want), got, want)
			}
			for i := range want {
				// Statuses and the bodies the handlers saw match; net/http's
				// own error answers (400, 431, 501) are its text either way.
				if got[i] != want[i] {
					t.Errorf("answer %d differs:\nmemgate  %q\nnet/http %q", i, got[i], want[i])
				}
			}
		})
	}
}
