package responses

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got (JSON, indented for reading) with testdata/name.golden.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", name, err, got)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs from %s:\n%s", name, path, buf.Bytes())
	}
}

// chatMsg builds a stored chat message.
func chatMsg(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// prepared builds what inject returns: the request's system messages, the
// memory block, stored turns, then the request's other messages from index
// keepFrom (among the non-system ones) on.
func prepared(r *Request, block string, stored []json.RawMessage, keepFrom int) memory.Prepared {
	var sys, rest []json.RawMessage
	for i, m := range r.Messages {
		if memory.IsSystem(r.Parsed[i].Role) {
			sys = append(sys, m)
		} else {
			rest = append(rest, m)
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
