package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestReadLean(t *testing.T) {
	tests := []struct {
		name, wire     string
		head, body     string
		wantFramingErr bool
	}{
		{name: "request with body",
			wire: "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Memory-Mode: off\r\nContent-Length: 2\r\n\r\n{}",
			head: "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n", body: "{}"},
		{name: "no body", wire: "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", head: "GET /v1/models HTTP/1.1\r\nHost: x\r\n"},
		{name: "chunked is refused", wire: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", wantFramingErr: true},
		{name: "bad length", wire: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", wantFramingErr: true},
		{name: "field without colon", wire: "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", wantFramingErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m leanMessage
			err := readLean(bufio.NewReader(strings.NewReader(tt.wire)), &m, isMemoryHeader)
			if tt.wantFramingErr {
				if err != errLeanFraming {
					t.Fatalf("err = %v, want errLeanFraming", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(m.head) != tt.head || string(m.body) != tt.body {
				t.Fatalf("head %q body %q, want %q %q", m.head, m.body, tt.head, tt.body)
			}
		})
	}
}

func TestServeLeanForwards(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	headers := func() []http.Header {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"echo":`+string(b)+`}`)
	}))
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveLean(ctx, ln, up.URL) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveLean: %v", err)
		}
	}()
	client := &http.Client{}
	ids := map[string]bool{}
	for i := range 3 { // one keep-alive connection, several requests
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/v1/chat/completions", strings.NewReader(`{"n":1}`))
		req.Header.Set("X-Memory-Mode", "off")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != `{"echo":{"n":1}}` {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
		id := resp.Header.Get("X-Request-Id")
		if id == "" || ids[id] {
			t.Fatalf("request %d: request id %q missing or repeated", i, id)
		}
		ids[id] = true
	}
	for i, h := range headers() {
		if h.Get("X-Memory-Mode") != "" || h.Get("X-Request-Id") == "" {
			t.Fatalf("upstream request %d had headers %v", i, h)
		}
	}
	// Not JSON: refused without calling the upstream.
	resp, err := client.Post("http://"+ln.Addr().String()+"/v1/chat/completions", "application/json", strings.NewReader("{"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := len(headers()); resp.StatusCode != http.StatusBadRequest || n != 3 {
		t.Fatalf("bad JSON: status %d, upstream called %d times", resp.StatusCode, n)
	}
}
