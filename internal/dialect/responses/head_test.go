package responses

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestStreamHead: the head of a stream is read up to its first event's
// end, which names the response it created, and no further; a first
// event of another kind names none; a stream cut before its first
// event's end says so.
func TestStreamHead(t *testing.T) {
	created := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"queued\"}}\n\n"
	next := "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"resp_1\"}}\n\n"
	for _, tc := range []struct {
		name, stream, id string
		err              error
	}{
		{"created", created + next, "resp_1", nil},
		{"another event first", "event: error\ndata: {\"type\":\"error\",\"message\":\"x\"}\n\n" + created, "", nil},
		{"cut before the end", created[:40], "", io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.NewReader(tc.stream)
			head, id, err := StreamHead(iotest.OneByteReader(src), 64<<10)
			if id != tc.id || !errors.Is(err, tc.err) {
				t.Fatalf("StreamHead = %q, %v; want %q, %v", id, err, tc.id, tc.err)
			}
			rest, _ := io.ReadAll(src)
			if string(head)+string(rest) != tc.stream {
				t.Errorf("head %q and rest %q do not make the stream", head, rest)
			}
			if tc.err == nil && !strings.HasSuffix(string(head), "\n\n") {
				t.Errorf("head %q read past its first event", head)
			}
		})
	}
	big := "data: " + strings.Repeat("x", 100<<10) + "\n\n"
	if head, id, err := StreamHead(strings.NewReader(big), 64<<10); id != "" || err != nil || len(head) > 70<<10 {
		t.Errorf("StreamHead of a first event past the limit = %d bytes, %q, %v; want at most the limit, none", len(head), id, err)
	}
}
