package prompt

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// benchReasoningHistory is a stored history of n exchanges with a
// reasoning model behind OpenRouter: a user question, then the reply
// with its plain reasoning (reasoning, about 1.5 KB) and its
// reasoning_details (the same text signed, an encrypted detail of about
// 1 KB) and their digest, as capture stores it; plain when reasoning is
// false.
func benchReasoningHistory(r *rand.Rand, n int, reasoning bool) []memory.Message {
	var out []memory.Message
	add := func(v any) {
		raw, _ := json.Marshal(v)
		m, err := memory.ParseMessage(raw)
		if err != nil {
			panic(err)
		}
		m.Seq, m.Key = int64(len(out)+1), memory.Key(fmt.Sprintf("r%d", len(out)), 0)
		out = append(out, m)
	}
	for range n {
		add(map[string]any{"role": "user", "content": benchText(r)})
		reply := map[string]any{"role": "assistant", "content": benchReply + " " + benchText(r)}
		if reasoning {
			text := strings.Repeat(benchText(r)+" ", 15)
			details := fmt.Sprintf(`[{"type":"reasoning.text","text":%q,"signature":"EqQBCkgIBxABGAIiQBs0c2lnbmVk","id":null,"format":"anthropic-claude-v1","index":0},`+
				`{"type":"reasoning.encrypted","data":%q,"id":null,"format":"anthropic-claude-v1","index":1}]`, text, strings.Repeat("EmwKAhgBEgy3va3pzix", 50))
			reply["reasoning"] = text
			reply["reasoning_details"] = json.RawMessage(details)
			reply["reasoning_details_sha256"] = memory.ReasoningDigest([]byte(details))
		}
		add(reply)
	}
	return out
}

// BenchmarkContinuationReasoning measures continuation — what a request
// does to the stored turns it replays, reasoning removed — over 20
// exchanges with a reasoning model (reasoning) and without (plain: what
// every request would cost if storing removed the reasoning once), for a
// request that asks something new.
func BenchmarkContinuationReasoning(b *testing.B) {
	rest := []memory.Message{mustMsg(b, `{"role":"user","content":"And the total?"}`)}
	for _, reasoning := range []bool{false, true} {
		stored := benchReasoningHistory(rand.New(rand.NewPCG(3, 3)), 20, reasoning)
		b.Run(map[bool]string{false: "plain", true: "reasoning"}[reasoning], func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU(b)
			for b.Loop() {
				continuation(stored, rest, false)
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkCutReasoning compares, on the replies of
// benchReasoningHistory, the two ways withoutReasoning can remove their
// reasoning: decoding each reply, deleting the members and encoding it
// again (as it does for the turns of a tool loop, which keep some), and
// cutting them out of the bytes (cutReasoning, for every other turn).
func BenchmarkCutReasoning(b *testing.B) {
	var replies [][]byte
	for _, m := range benchReasoningHistory(rand.New(rand.NewPCG(3, 3)), 20, true) {
		if m.Role == "assistant" {
			replies = append(replies, m.Raw)
		}
	}
	b.Run("decode-encode", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU(b)
		for b.Loop() {
			for _, raw := range replies {
				var fields map[string]json.RawMessage
				if err := json.Unmarshal(raw, &fields); err != nil {
					b.Fatal(err)
				}
				for k := range fields {
					if isReasoning(k) {
						delete(fields, k)
					}
				}
				if _, err := json.Marshal(fields); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	})
	b.Run("cut", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU(b)
		for b.Loop() {
			for _, raw := range replies {
				if _, ok := cutReasoning(raw); !ok {
					b.Fatal("not an object")
				}
			}
		}
		b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	})
}
