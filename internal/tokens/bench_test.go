package tokens_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchConversation is a realistic 20-message conversation (about 6 KB).
func benchConversation() ([]json.RawMessage, int64) {
	user := "Could you explain how the quarterly revenue projections were derived, and which assumptions about churn they rely on? "
	assistant := "Sure. The projections start from last quarter's recurring revenue, apply the observed 2.1% monthly churn, and add expected expansion from the three enterprise deals in the pipeline. "
	msgs := []json.RawMessage{json.RawMessage(`{"role":"system","content":"You are a concise financial analyst assistant."}`)}
	var size int64
	for i := range 10 {
		for _, m := range []map[string]string{
			{"role": "user", "content": strings.Repeat(user, 1+i%3)},
			{"role": "assistant", "content": strings.Repeat(assistant, 1+i%2)},
		} {
			b, _ := json.Marshal(m)
			msgs = append(msgs, b)
			size += int64(len(m["content"]))
		}
	}
	return msgs, size
}

// BenchmarkMessages reports conversations counted per second; MB/s is the
// message text counted.
func BenchmarkMessages(b *testing.B) {
	c := mustCounter(b, nil)
	msgs, size := benchConversation()
	for _, model := range []string{"gpt-4o", "gpt-4"} {
		b.Run(model, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				c.Messages(model, msgs)
			}
			b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkText reports the raw encoder's throughput on English prose.
func BenchmarkText(b *testing.B) {
	c := mustCounter(b, nil)
	text := strings.Repeat("The quick brown fox jumps over the lazy dog while the committee reviews the budget. ", 64)
	for _, model := range []string{"gpt-4o", "gpt-4"} {
		b.Run(model, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				c.Text(model, text)
			}
		})
	}
}

// BenchmarkMessagesParallel measures counting from all cores at once.
func BenchmarkMessagesParallel(b *testing.B) {
	c := mustCounter(b, nil)
	msgs, size := benchConversation()
	b.SetBytes(size)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Messages("gpt-4o", msgs)
		}
	})
}

// BenchmarkRequestMessages counts a warm conversation as one request does:
// through its owner's view of the counter (Counter.Owned), made once per
// request.
func BenchmarkRequestMessages(b *testing.B) {
	c := mustCounter(b, nil)
	msgs, size := benchConversation()
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		c.Owned("tenant", "user").Messages("gpt-4o", msgs)
	}
}
