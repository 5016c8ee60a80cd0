package httpserve

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// FuzzServe feeds arbitrary bytes to a connection: the server must neither
// panic nor hang, and whatever it answers must parse as HTTP responses.
func FuzzServe(f *testing.F) {
	for _, seed := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
		"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"HEAD / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n",
		"GET /\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		w.Write(b)
	})}
	f.Fuzz(func(t *testing.T, in []byte) {
		client, server := net.Pipe()
		c := newConn(s, server, context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.serve()
		}()
		go func() {
			client.Write(in)
			// Half-close is not possible on a pipe: give the server a
			// moment to answer what it could parse, then hang up.
			time.Sleep(time.Millisecond)
			client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		}()
		out, _ := io.ReadAll(client)
		client.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("connection goroutine still running for %q", in)
		}
		br := bufio.NewReader(bytes.NewReader(out))
		for br.Buffered() > 0 || len(out) > 0 {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				if err == io.EOF {
					break
				}
				t.Fatalf("unparsable answer %q to %q: %v", out, in, err)
			}
			io.Copy(io.Discard, resp.Body)
			if _, err := br.Peek(1); err != nil {
				break
			}
		}
	})
}
