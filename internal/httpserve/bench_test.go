package httpserve

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkServe is one keep-alive connection sending a small POST and
// reading a small JSON answer, back to back, against this server and
// net/http's with the same handler: the server's own cost per request
// (latency per op; allocations by both the server and the raw client).
func BenchmarkServe(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	servers := []struct {
		name  string
		serve func(net.Listener) (stop func())
	}{
		{"memgate", func(ln net.Listener) func() {
			s := &Server{Handler: handler}
			go s.Serve(ln)
			return func() { s.Close() }
		}},
		{"stdlib", func(ln net.Listener) func() {
			s := &http.Server{Handler: handler}
			go s.Serve(ln)
			return func() { s.Close() }
		}},
	}
	const body = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	request := "POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: " +
		itoa(int64(len(body))) + "\r\n\r\n" + body
	for _, srv := range servers {
		b.Run(srv.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer srv.serve(ln)()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			req := &http.Request{Method: http.MethodPost}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := io.WriteString(c, request); err != nil {
					b.Fatal(err)
				}
				resp, err := http.ReadResponse(br, req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d: %v", resp.StatusCode, err)
				}
				resp.Body.Close()
			}
		})
	}
}
