package rawconn

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// pair returns the two ends of a loopback TCP connection, the first wrapped.
func pair(tb testing.TB) (wrapped, peer net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			tb.Error(err)
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	p := <-accepted
	tb.Cleanup(func() { c.Close(); p.Close() })
	return Wrap(c), p
}

func TestWrapOnlyWhatItCan(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a) != a {
		t.Fatal("a net.Pipe end (no file descriptor) was wrapped")
	}
	w, _ := pair(t)
	if runtime.GOOS == "linux" {
		if _, ok := w.(*conn); !ok {
			t.Fatalf("TCP connection not wrapped: %T", w)
		}
		if Wrap(w) != w {
			t.Fatal("wrapping twice made a new value")
		}
	}
}

func TestLargeTransfersBothWays(t *testing.T) {
	w, p := pair(t)
	// Larger than any socket buffer, so writes wait for room.
	data := make([]byte, 8<<20)
	rand.Read(data)
	for _, tc := range []struct {
		name     string
		src, dst net.Conn
	}{{"wrapped writes", w, p}, {"wrapped reads", p, w}} {
		t.Run(tc.name, func(t *testing.T) {
			errc := make(chan error, 1)
			go func() {
				n, err := tc.src.Write(data)
				if err == nil && n != len(data) {
					err = io.ErrShortWrite
				}
				errc <- err
			}()
			got := make([]byte, len(data))
			if _, err := io.ReadFull(tc.dst, got); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatal("received bytes differ from those sent")
			}
		})
	}
}

func TestEOFAfterPeerCloses(t *testing.T) {
	w, p := pair(t)
	p.Write([]byte("last"))
	p.Close()
	got, err := io.ReadAll(w)
	if err != nil || string(got) != "last" {
		t.Fatalf("ReadAll = %q, %v", got, err)
	}
	if n, err := w.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("Read after EOF = %d, %v", n, err)
	}
}

func TestErrors(t *testing.T) {
	t.Run("read deadline", func(t *testing.T) {
		w, _ := pair(t)
		w.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		_, err := w.Read(make([]byte, 1))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("err = %v, want a timeout", err)
		}
		var oe *net.OpError
		if !errors.As(err, &oe) || oe.Op != "read" {
			t.Fatalf("err = %#v, want a *net.OpError for read", err)
		}
	})
	t.Run("close during read", func(t *testing.T) {
		w, _ := pair(t)
		errc := make(chan error, 1)
		go func() {
			_, err := w.Read(make([]byte, 1))
			errc <- err
		}()
		time.Sleep(5 * time.Millisecond) // let Read reach the poller; either way it must fail
		w.Close()
		if err := <-errc; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("err = %v, want net.ErrClosed", err)
		}
		if _, err := w.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Write after Close = %v, want net.ErrClosed", err)
		}
	})
	t.Run("reset by peer", func(t *testing.T) {
		w, p := pair(t)
		p.(*net.TCPConn).SetLinger(0)
		p.Close()
		_, err := w.Read(make([]byte, 1))
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("err = %v, want ECONNRESET", err)
		}
		var oe *net.OpError
		if !errors.As(err, &oe) || oe.Op != "read" {
			t.Fatalf("err = %#v, want a *net.OpError for read", err)
		}
	})
	t.Run("write to a closed peer", func(t *testing.T) {
		w, p := pair(t)
		p.(*net.TCPConn).SetLinger(0)
		p.Close()
		var err error
		for i := 0; i < 100 && err == nil; i++ {
			_, err = w.Write(make([]byte, 64<<10))
		}
		if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("err = %v, want EPIPE or ECONNRESET", err)
		}
	})
}

// BenchmarkPingPong is one small message each way, the shape of a proxied
// request, on the wrapped connection and on net's own.
func BenchmarkPingPong(b *testing.B) {
	for _, raw := range []bool{true, false} {
		name := "net"
		if raw {
			name = "raw"
		}
		b.Run(name, func(b *testing.B) {
			w, p := pair(b)
			if !raw {
				w = w.(*conn).Conn
			}
			go func() {
				buf := make([]byte, 512)
				for {
					n, err := p.Read(buf)
					if err != nil {
						return
					}
					p.Write(buf[:n])
				}
			}()
			msg, buf := make([]byte, 512), make([]byte, 512)
			b.ReportAllocs()
			for b.Loop() {
				w.Write(msg)
				io.ReadFull(w, buf)
			}
		})
	}
}
