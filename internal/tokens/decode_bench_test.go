package tokens_test

import (
	"encoding/json"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// shortMessages are messages under the memo's threshold: decoded and
// counted on every call.
var shortMessages = []json.RawMessage{
	json.RawMessage(`{"role":"user","content":"hi there"}`),
	json.RawMessage(`{"role":"assistant","content":"Hello!"}`),
	json.RawMessage(`{"role":"user","name":"ana","content":"ok"}`),
	json.RawMessage(`{"role":"tool","tool_call_id":"c1","content":"18C"}`),
}

// BenchmarkRawMessageShort counts short messages from their JSON: the
// decode dominates.
func BenchmarkRawMessageShort(b *testing.B) {
	c := mustCounter(b, nil)
	b.ReportAllocs()
	for b.Loop() {
		for _, m := range shortMessages {
			c.RawMessage("gpt-4o", m)
		}
	}
}

// BenchmarkMessageShort counts the same messages from what
// memory.ParseMessage read of them, as a request's are counted.
func BenchmarkMessageShort(b *testing.B) {
	c := mustCounter(b, nil)
	msgs := make([]memory.Message, len(shortMessages))
	for i, raw := range shortMessages {
		m, err := memory.ParseMessage(raw)
		if err != nil {
			b.Fatal(err)
		}
		msgs[i] = m
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, m := range msgs {
			c.Message("gpt-4o", m)
		}
	}
}
