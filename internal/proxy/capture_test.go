package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/memory"
)

// piecesReader returns its data in pieces of at most size bytes, and EOF
// with the last piece when eofWithData.
type piecesReader struct {
	data        []byte
	size        int
	eofWithData bool
}

func (r *piecesReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.data[:min(r.size, len(r.data))])
	r.data = r.data[n:]
	if len(r.data) == 0 && r.eofWithData {
		return n, io.EOF
	}
	return n, nil
}

// keptStream keeps what the tee wrote to it.
type keptStream struct{ bytes.Buffer }

func (k *keptStream) Result() (memory.Message, *memory.Usage, error) {
	return memory.Message{Role: "assistant", Content: k.String()}, nil, nil
}

func (k *keptStream) HangUp() bool { return false }

func (k *keptStream) HungUpResult() (memory.Message, *memory.Usage, error) { return k.Result() }

// blankLineEnd returns the index of the newline that ends s's first blank
// line, or -1.
func blankLineEnd(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] != '\n' {
			continue
		}
		rest := s[i+1:]
		switch {
		case strings.HasPrefix(rest, "\n"):
			return i + 1
		case strings.HasPrefix(rest, "\r\n"):
			return i + 2
		}
	}
	return -1
}

// TestTeeBodyReleasesTheTerminalEventOnlyOnceStored: the bytes from the
// terminal event's blank line (which completes it) reaches the client only after onEnd (which
// stores the exchange) ran, once, with the whole stream already teed; the
// client gets every byte, unchanged, whatever the read sizes; a stream
// without a terminal event is stored before its EOF is returned.
func TestTeeBodyReleasesTheTerminalEventOnlyOnceStored(t *testing.T) {
	chatEnd := chatAPI(nil).streamEnd
	anthropicEnd := messagesAPI(nil).streamEnd
	responsesEnd := responsesAPI(nil).streamEnd
	tests := []struct {
		name   string
		body   string
		end    func([]byte) bool
		marker string // the terminal event's first line; "" for none
	}{
		{"chat", "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n", chatEnd, "data: [DONE]"},
		{"chat CRLF, no space", "data: {\"a\":1}\r\n\r\ndata:[DONE]\r\n\r\n", chatEnd, "data:[DONE]"},
		{"chat marker inside content", "data: {\"c\":\"data: [DONE]\\n\"}\n\n: data: [DONE]\n\ndata: [DONE]\n\n", chatEnd, "\ndata: [DONE]\n\n"},
		{"chat usage after content", "data: {\"a\":1}\n\ndata: {\"usage\":{}}\n\ndata: [DONE]\n\n", chatEnd, "data: [DONE]"},
		{"anthropic", "event: message_start\ndata: {}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", anthropicEnd, "event: message_stop"},
		{"responses", "event: response.created\ndata: {}\n\nevent: response.completed\ndata: {}\n\n", responsesEnd, "event: response.completed"},
		{"no terminal event", "data: {\"a\":1}\n\n", chatEnd, ""},
		{"terminal event without its blank line", "data: {\"a\":1}\n\ndata: [DONE]\n", chatEnd, "data: [DONE]"},
	}
	for _, tt := range tests {
		for _, size := range []int{1, 2, 3, 7, 16, 1 << 20} {
			for _, eofWithData := range []bool{false, true} {
				kept := &keptStream{}
				var got []byte
				ends, endedAt, eofBeforeEnd := 0, -1, false
				b := &teeBody{
					ReadCloser: io.NopCloser(&piecesReader{data: []byte(tt.body), size: size, eofWithData: eofWithData}),
					t:          newTee(kept),
					endLine:    tt.end,
				}
				b.onEnd = func() {
					ends++
					endedAt = len(got)
					if _, _, err := b.t.result(); err != nil {
						t.Errorf("tee: %v", err)
					}
				}
				buf := make([]byte, 4096)
				for {
					n, err := b.Read(buf)
					got = append(got, buf[:n]...)
					if errors.Is(err, io.EOF) {
						eofBeforeEnd = ends == 0
						break
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				name := tt.name
				if string(got) != tt.body {
					t.Fatalf("%s/%d: client got %q, want %q", name, size, got, tt.body)
				}
				if ends != 1 || eofBeforeEnd {
					t.Fatalf("%s/%d: onEnd ran %d times (EOF before it: %v), want once before EOF", name, size, ends, eofBeforeEnd)
				}
				if kept.String() != tt.body {
					t.Fatalf("%s/%d: tee kept %q, want the whole stream", name, size, kept.String())
				}
				// The client may have the terminal event's lines but not the
				// blank line that completes (dispatches) it.
				want := len(tt.body)
				if tt.marker != "" {
					pos := strings.LastIndex(tt.body, tt.marker)
					if k := blankLineEnd(tt.body[pos:]); k >= 0 {
						want = pos + k
					}
				}
				if endedAt > want {
					t.Fatalf("%s/%d: the client had %d bytes (%q) before the exchange was stored; want at most %d",
						name, size, endedAt, got[:endedAt], want)
				}
			}
		}
	}
}

// TestTeeBodyHoldsABoundedTerminalEvent: an upstream that writes on after
// the terminal event's first line without ever completing it (no blank
// line) is relayed as it comes once the hold passes the capture cap,
// rather than buffered whole in the gateway's memory until its EOF.
func TestTeeBodyHoldsABoundedTerminalEvent(t *testing.T) {
	line := strings.Repeat("x", 1<<10) + "\n"
	body := "data: {\"a\":1}\n\ndata: [DONE]\n" + strings.Repeat(line, 3*maxCaptureBytes/len(line))
	ends := 0
	b := &teeBody{
		ReadCloser: io.NopCloser(&piecesReader{data: []byte(body), size: 32 << 10}),
		t:          newTee(&keptStream{}),
		endLine:    chatAPI(nil).streamEnd,
	}
	b.onEnd = func() {
		ends++
		b.t.result()
	}
	var got int
	buf := make([]byte, 32<<10)
	for {
		n, err := b.Read(buf)
		got += n
		if len(b.held) > maxCaptureBytes+len(buf) {
			t.Fatalf("held %d bytes of an incomplete terminal event, want at most %d", len(b.held), maxCaptureBytes+len(buf))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if got != len(body) || ends != 1 {
		t.Fatalf("client got %d of %d bytes, onEnd ran %d times; want all, once", got, len(body), ends)
	}
}

func TestSSEField(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{"data: [DONE]", true},
		{"data:[DONE]", true},
		{"data:  [DONE]", false},
		{"data: [DONE] ", false},
		{"data", false},
		{"data:", false},
		{"dat: [DONE]", false},
		{"event: data: [DONE]", false},
		{": data: [DONE]", false},
	}
	for _, tt := range tests {
		if got := sseField([]byte(tt.line), "data", "[DONE]"); got != tt.want {
			t.Errorf("sseField(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { sseField([]byte("event: message_stop"), "event", "message_stop") }); n != 0 {
		t.Errorf("sseField allocates %v times per call, want 0", n)
	}
}

// failingStream's reassembly fails, so its capture is counted as skipped
// rather than handed to a Capturer.
type failingStream struct{ bytes.Buffer }

func (f *failingStream) Result() (memory.Message, *memory.Usage, error) {
	return memory.Message{}, nil, errors.New("unreadable")
}

func (f *failingStream) HangUp() bool { return false }

func (f *failingStream) HungUpResult() (memory.Message, *memory.Usage, error) { return f.Result() }

// TestFinishThenAbandonClosesTheStreamOnce: a stream whose body did not
// end its capture is finished on a goroutine, and the handler's deferred
// abandon runs right after; before, abandon could find the capture not
// yet done and close the tee the goroutine was reading the result of: a
// double close, which crashes the process.
func TestFinishThenAbandonClosesTheStreamOnce(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{m: m, log: slog.New(slog.DiscardHandler)}
	for range 200 {
		c := &exchangeCapture{p: p, stream: newTee(&failingStream{})}
		c.stream.feed([]byte("data: {}\n\n"))
		c.finish(context.Background())
		c.abandon(context.Background())
	}
	p.captures.Wait()
}
