package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"github.com/memgate/memgate/internal/rawconn"
)

// The lean target is a reference point, not a product: a forwarder that
// does the per-request work a gateway cannot skip — it reads the request's
// header fields, checks the body is JSON, gives the request an id, runs the
// upstream call under a context and a circuit breaker, and records a
// counter and a latency histogram — with no HTTP library: it scans
// HTTP/1.1 framing itself and supports only Content-Length bodies (so no
// streaming targets). It shows how close a Go gateway can get to the floor
// on the machine at hand; memgate's distance from it is what its HTTP stack
// (net/http's parsers, echo, the handler's generality) costs.

// leanMessage is one HTTP/1.1 message as the lean forwarder sees it.
type leanMessage struct {
	head []byte // the start line and header fields, blank line excluded
	body []byte
}

// errLeanFraming is a message the lean forwarder does not handle.
var errLeanFraming = errors.New("lean: only Content-Length framing is supported")

// readLean reads one message into m, reusing its buffers; it drops the
// header fields for which drop reports true.
func readLean(br *bufio.Reader, m *leanMessage, drop func(name []byte) bool) error {
	m.head = m.head[:0]
	n := 0
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if !first {
			name, value, ok := bytes.Cut(line, []byte(":"))
			if !ok {
				return errLeanFraming
			}
			switch {
			case bytes.EqualFold(name, []byte("Content-Length")):
				if n, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil || n < 0 {
					return errLeanFraming
				}
			case bytes.EqualFold(name, []byte("Transfer-Encoding")):
				return errLeanFraming
			case drop != nil && drop(name):
				continue
			}
		}
		m.head = append(m.head, line...)
	}
	if cap(m.body) < n {
		m.body = make([]byte, n)
	}
	m.body = m.body[:n]
	_, err := io.ReadFull(br, m.body)
	return err
}

// appendLean appends m with an X-Request-Id field to out.
func appendLean(out []byte, m *leanMessage, id string) []byte {
	out = append(out, m.head...)
	out = append(out, "X-Request-Id: "...)
	out = append(out, id...)
	out = append(out, "\r\n\r\n"...)
	return append(out, m.body...)
}

// isMemoryHeader reports the memgate-specific request fields, which a
// gateway consumes rather than forwards.
func isMemoryHeader(name []byte) bool {
	return len(name) > 9 && bytes.EqualFold(name[:9], []byte("X-Memory-"))
}

// serveLean runs the lean forwarder in front of upstream (a base URL) on ln
// until ctx ends.
func serveLean(ctx context.Context, ln net.Listener, upstream string) error {
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%s: bad upstream URL %q", upstreamEnv, upstream)
	}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lean_requests_total"}, []string{"route", "status"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lean_request_seconds"}, []string{"route", "status"})
	ok, okLatency := requests.WithLabelValues("chat", "200"), latency.WithLabelValues("chat", "200")
	breaker := gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{Name: "upstream"})
	var seq atomic.Uint64
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			c = rawconn.Wrap(c)
			defer c.Close()
			br := bufio.NewReader(c)
			var up net.Conn
			var ubr *bufio.Reader
			defer func() {
				if up != nil {
					up.Close()
				}
			}()
			var req, resp leanMessage
			out := make([]byte, 0, 8<<10)
			for {
				if err := readLean(br, &req, isMemoryHeader); err != nil {
					return
				}
				start := time.Now()
				rctx, cancel := context.WithCancelCause(ctx)
				if !json.Valid(req.body) {
					cancel(nil)
					c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
					return
				}
				id := "req-lean-" + strconv.FormatUint(seq.Add(1), 10)
				_, err := breaker.Execute(func() (struct{}, error) {
					if up == nil {
						uc, err := (&net.Dialer{}).DialContext(rctx, "tcp", u.Host)
						if err != nil {
							return struct{}{}, err
						}
						up = rawconn.Wrap(uc)
						ubr = bufio.NewReader(up)
					}
					out = appendLean(out[:0], &req, id)
					if _, err := up.Write(out); err != nil {
						return struct{}{}, err
					}
					return struct{}{}, readLean(ubr, &resp, nil)
				})
				cancel(nil)
				if err != nil {
					return
				}
				out = appendLean(out[:0], &resp, id)
				if _, err := c.Write(out); err != nil {
					return
				}
				ok.Inc()
				okLatency.Observe(time.Since(start).Seconds())
			}
		}()
	}
}
