package redis

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// TestClientEndsACommandByItsDeadline: a Redis that accepts connections
// and never answers (a network dropping packets) must not hold a command
// past its context's deadline. The client's own read timeout is set to a
// minute here, so a command that waits it out does not answer within the
// 30 s this test allows; one ended by its 200 ms deadline does, however
// busy the machine.
func TestClientEndsACommandByItsDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	rdb, err := NewClient("redis://" + ln.Addr().String() + "/0?read_timeout=60s&write_timeout=60s&max_retries=-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })

	answered := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		answered <- rdb.Ping(ctx).Err()
	}()
	select {
	case err := <-answered:
		if err == nil {
			t.Fatal("a silent Redis answered the ping")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the ping outlasted its 200ms deadline by 30s: the client waits out its own read timeout")
	}
}
