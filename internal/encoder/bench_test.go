package encoder

import (
	"fmt"
	"testing"
)

// query20 is a 20-word question, as a user asks one.
const query20 = "Last spring my sister told me about the new job she had found in Lisbon, what was the company called again?"

// BenchmarkEmbedQuery is one 20-word query embedded alone (the request
// path's cost on a cache miss). Run with -cpu 1 for one core.
func BenchmarkEmbedQuery(b *testing.B) {
	m := mustDefault(b)
	b.ReportMetric(float64(len(m.Tokenizer().Encode(query20))), "pieces")
	b.ResetTimer()
	for b.Loop() {
		m.Embed([]string{query20})
	}
}

// BenchmarkEmbedMessages is indexing: batches of chat messages (about 25
// words each) embedded together; it reports messages per second.
func BenchmarkEmbedMessages(b *testing.B) {
	m := mustDefault(b)
	for _, batch := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			texts := make([]string, batch)
			for i := range texts {
				texts[i] = fmt.Sprintf("Message %d: we talked about the trip to the mountains and how the kids loved the cabin, next time we want to stay longer.", i)
			}
			n := 0
			for b.Loop() {
				m.Embed(texts)
				n += batch
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkTokenize is the tokenizer alone on the 20-word query.
func BenchmarkTokenize(b *testing.B) {
	tok := mustDefault(b).Tokenizer()
	for b.Loop() {
		tok.Encode(query20)
	}
}
