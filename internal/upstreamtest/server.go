// Package upstreamtest runs a fake OpenAI-compatible upstream for tests: it
// speaks the real wire format (chat.completion JSON, SSE chunk streams with
// tool-call deltas and usage, error bodies, /v1/models, /v1/embeddings,
// /v1/responses), lets a test script each reply, and records every request it
// received so tests can assert what the gateway sent upstream.
package upstreamtest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Request is one request the fake upstream received.
type Request struct {
	Method string
	// Path is the URL path, including the /v1 prefix.
	Path string
	// RawQuery is the URL query string.
	RawQuery string
	Header   http.Header
	Body     []byte
}

// Server is a fake upstream. Its handler can be replaced while it runs.
type Server struct {
	srv     *httptest.Server
	mu      sync.Mutex
	handler http.Handler
	reqs    []Request
}

// New starts a fake upstream serving h (Default() when h is nil) and stops it
// when the test ends.
func New(tb testing.TB, h http.Handler) *Server {
	tb.Helper()
	if h == nil {
		h = Default()
	}
	s := &Server{handler: h}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.srv.Close)
	return s
}

// serve records the request and hands it, with its body restored, to the
// current handler.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Header:   r.Header.Clone(),
		Body:     body,
	})
	h := s.handler
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

// URL returns the API root to configure as the upstream base URL: the
// server's address followed by /v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Addr returns the server's root URL without the /v1 suffix.
func (s *Server) Addr() string { return s.srv.URL }

// SetHandler replaces the handler for the requests that follow.
func (s *Server) SetHandler(h http.Handler) {
	s.mu.Lock()
	s.handler = h
	s.mu.Unlock()
}

// Requests returns a copy of every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	copy(out, s.reqs)
	return out
}

// Calls returns how many requests were received so far.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// Last returns the most recent request; it fails the test when none arrived.
func (s *Server) Last(tb testing.TB) Request {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		tb.Fatal("upstreamtest: no request received")
	}
	return s.reqs[len(s.reqs)-1]
}

// CloseClientConnections drops every open connection to the server, as a
// crashing upstream would.
func (s *Server) CloseClientConnections() { s.srv.CloseClientConnections() }
