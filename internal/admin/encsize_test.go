package admin

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestEncodedSizeMatchesEncodingJSON: stringSize is the length
// encoding/json gives a string, and rawSize at least the length it gives
// a raw message, for text of every kind of character it escapes.
func TestEncodedSizeMatchesEncodingJSON(t *testing.T) {
	alphabet := []string{"a", "é", "漢", "<", ">", "&", `"`, `\`, "\n", "\t", "\x01", "\x7f", "\u2028", "\u2029", "\xff", "\xe2\x80", " "}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var s string
		for range rng.IntN(40) {
			s += alphabet[rng.IntN(len(alphabet))]
		}
		b, _ := json.Marshal(s)
		if got := stringSize(s); got != len(b) {
			t.Fatalf("stringSize(%q) = %d, encoding/json writes %d bytes", s, got, len(b))
		}
		if !json.Valid([]byte(s)) {
			raw, _ := json.Marshal(map[string]string{"content": s})
			s = string(raw)
		}
		b, _ = json.Marshal(json.RawMessage(s))
		if got := rawSize([]byte(s)); got < len(b) {
			t.Fatalf("rawSize(%q) = %d, encoding/json writes %d bytes", s, got, len(b))
		}
	}
	m := memory.Message{Conversation: "c", Seq: 1 << 62, Key: "ex-1:0", Role: "assistant", Content: "<>",
		Raw: json.RawMessage(`{"role":"assistant","content":"<>"}`), Tokens: 1 << 40}
	b, _ := json.Marshal(m)
	if got := encodedSize(m); got < len(b) {
		t.Fatalf("encodedSize = %d, encoding/json writes %d bytes: %s", got, len(b), b)
	}
}
