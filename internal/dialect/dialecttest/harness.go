package dialecttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/memgate/memgate/internal/dialect/chat"
	"github.com/memgate/memgate/internal/memory"
)

// Golden compares got (JSON, indented for reading) with
// testdata/name.golden; with update set it rewrites that file instead.
// Callers pass their package's -update flag.
func Golden(tb testing.TB, name string, got []byte, update bool) {
	tb.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		tb.Fatalf("%s: not JSON: %v\n%s", name, err, got)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", name+".golden")
	if update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		tb.Errorf("%s differs from %s:\n%s", name, path, buf.Bytes())
	}
}

// JSON returns v encoded (a stored chat message, say), failing tb when it
// cannot be.
func JSON(tb testing.TB, v any) json.RawMessage {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// SameJSON reports whether the JSON texts a and b hold the same value
// (object members in any order, any escapes and spacing). It fails the
// test when b, the expected value, is not JSON; a that is not is not the
// same.
func SameJSON(tb testing.TB, a, b []byte) bool {
	tb.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil {
		return false
	}
	if err := json.Unmarshal(b, &y); err != nil {
		tb.Fatalf("expected value %s: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// Prepared builds what inject returns for the conversation c: its system
// messages, the memory block (none when block is ""), stored turns, then
// its other messages from index keepFrom (among the non-system ones) on.
func Prepared(c chat.Conversation, block string, stored []json.RawMessage, keepFrom int) memory.Prepared {
	var sys, rest []json.RawMessage
	for _, m := range c.Messages {
		if memory.IsSystem(m.Role) {
			sys = append(sys, m.Raw)
		} else {
			rest = append(rest, m.Raw)
		}
	}
	out := append([]json.RawMessage(nil), sys...)
	if block != "" {
		b, _ := json.Marshal(map[string]string{"role": "system", "content": block})
		out = append(out, b)
	}
	out = append(out, stored...)
	return memory.Prepared{Messages: append(out, rest[keepFrom:]...)}
}

// Stream is a dialect's reader of a streamed reply.
type Stream interface {
	io.Writer
	Result() (memory.Message, *memory.Usage, error)
}

// Feed writes stream to s in pieces of step bytes, stopping at the first
// write that fails, and returns s.
func Feed[S io.Writer](s S, stream []byte, step int) S {
	for len(stream) > 0 {
		n := min(step, len(stream))
		if _, err := s.Write(stream[:n]); err != nil {
			return s
		}
		stream = stream[n:]
	}
	return s
}

// CheckStream feeds each of streams (by name) to a new reader in pieces of
// 1, 5, 7, 64, 100 and 1 MiB bytes, and fails t unless every one
// reassembles want — the reply read whole — with usage wantUsage.
func CheckStream[S Stream](t *testing.T, newStream func(limit int64) S, streams map[string][]byte, want memory.Message, wantUsage memory.Usage) {
	t.Helper()
	for name, stream := range streams {
		for _, step := range []int{1, 5, 7, 64, 100, 1 << 20} {
			got, u, err := Feed(newStream(0), stream, step).Result()
			if err != nil {
				t.Fatalf("%s step %d: %v", name, step, err)
			}
			if string(got.Raw) != string(want.Raw) || got.Content != want.Content {
				t.Errorf("%s step %d: streamed %s, whole %s", name, step, got.Raw, want.Raw)
			}
			if *u != wantUsage {
				t.Errorf("%s step %d: usage %+v, want %+v", name, step, *u, wantUsage)
			}
		}
	}
}

// StreamFailure is a stream a reader must refuse: Result fails with an
// error matching Want when Stream is fed to a reader made with Limit.
type StreamFailure struct {
	Name   string
	Stream []byte
	Limit  int64
	Want   error
}

// CheckStreamFailures feeds each case to a new reader in pieces of step
// bytes, one subtest a case.
func CheckStreamFailures[S Stream](t *testing.T, newStream func(limit int64) S, step int, cases []StreamFailure) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			if _, _, err := Feed(newStream(tt.Limit), tt.Stream, step).Result(); !errors.Is(err, tt.Want) {
				t.Errorf("Result error %v, want %v", err, tt.Want)
			}
		})
	}
}

// PreparedBlocks builds what inject returns for the conversation c with
// memory in two blocks, as inject lays them out: its system messages, the
// stable block (none when stable is ""), stored turns, its other messages
// from index keepFrom (among the non-system ones) on, with the recalled
// block (none when recalled is "") before the last user message. The
// blocks are system messages, or user messages when user is set
// (memory.position: user).
func PreparedBlocks(c chat.Conversation, stable, recalled string, user bool, stored []json.RawMessage, keepFrom int) memory.Prepared {
	role := "system"
	if user {
		role = "user"
	}
	var sys, rest []json.RawMessage
	var restRoles []string
	for _, m := range c.Messages {
		if memory.IsSystem(m.Role) {
			sys = append(sys, m.Raw)
		} else {
			rest = append(rest, m.Raw)
			restRoles = append(restRoles, m.Role)
		}
	}
	var p memory.Prepared
	out := append([]json.RawMessage(nil), sys...)
	add := func(text string, stable bool) {
		b, _ := json.Marshal(map[string]string{"role": role, "content": text})
		p.Blocks = append(p.Blocks, memory.Block{At: len(out), Stable: stable, Text: text})
		out = append(out, b)
	}
	if stable != "" {
		add(stable, true)
	}
	out = append(out, stored...)
	kept, keptRoles := rest[keepFrom:], restRoles[keepFrom:]
	q := len(kept) - 1
	for q > 0 && keptRoles[q] != "user" {
		q--
	}
	out = append(out, kept[:q]...)
	if recalled != "" {
		add(recalled, false)
	}
	p.Messages = append(out, kept[q:]...)
	return p
}
