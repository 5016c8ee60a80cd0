package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// The prompt-cache measurement (issue 28): a long synthetic conversation
// replayed through the real gateway (SQLite store, recall, default
// memory) as a newest-only client (conversation header, newest message
// only) and as a full-history client (the whole session resent, no
// header), at a 4,000-token budget. For every upstream prompt of 4,000
// characters or more it measures the share of the prompt that repeats the
// previous request's prompt byte for byte from its first byte — what a
// provider's prompt cache can serve — and the input cost that saves at
// the providers' published cache prices:
//
//   - OpenAI (automatic prompt caching): cached input billed at 50% of the
//     input price (GPT-4o family) or 25% (GPT-4.1 family); nothing extra to
//     write. Saving = repeated share × 50% (or 75%).
//   - Anthropic (cache_control breakpoints after the stable part, as
//     memory.cache_breakpoints adds): cache reads billed at 10%, cache
//     writes at 125% of base input. Per request: the repeated prefix is
//     read (0.1), the rest of the cacheable part — everything before the
//     recalled block — is written (1.25), and the recalled block and the
//     current turn are plain input (1.0). Saving = 1 − cost / prompt.
//
// Assumptions: the repeated share is counted in bytes of the request body
// (tokens follow bytes closely on the same text); the provider's cache
// is warm between consecutive requests (within its 5-10 minute lifetime)
// and serves the whole repeated prefix (OpenAI caches in 128-token steps
// from 1,024 tokens: a prompt under that saves nothing).

// cacheTopics are what the synthetic user talks about, so recall finds
// related turns across the conversation.
var cacheTopics = []string{
	"my sister's wedding in Porto next spring", "the budget for the kitchen renovation", "training for the half marathon in October",
	"learning to play the cello", "my job interview at the design studio", "planting tomatoes and basil on the balcony",
	"the trip to Kyoto with my partner", "adopting a greyhound from the shelter", "my grandmother's recipe for rice pudding",
	"switching my savings to an index fund", "the book club reading list", "fixing the bike's rear brake",
}

// cacheTurn is the user's message of turn i: a topic, a specific, a question.
func cacheTurn(r *rand.Rand, i int) string {
	t := cacheTopics[r.IntN(len(cacheTopics))]
	return fmt.Sprintf("About %s: on day %d I found that it costs around %d euros and takes %d hours. "+
		"I wrote down a few notes about it, including who I talked to and what they suggested. What should I do next?",
		t, i, 20+r.IntN(900), 1+r.IntN(12))
}

// cacheReply is the model's answer: a few sentences that vary.
func cacheReply(r *rand.Rand) string {
	n := 2 + r.IntN(4)
	var b strings.Builder
	for range n {
		fmt.Fprintf(&b, "Consider step %d, which usually takes %d minutes and helps keep things on track. ", r.IntN(9)+1, 5+r.IntN(55))
	}
	return strings.TrimSpace(b.String())
}

// cacheRun is one replay's measure.
type cacheRun struct {
	prompts                 int     // prompts of 4,000 characters or more
	share                   float64 // mean repeated share of them
	openai50, openai75, ant float64 // mean input-cost saving
}

// commonPrefix is the length of a's and b's common prefix.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// responsesReply is a Responses API reply whose one output item is a
// message of text.
func responsesReply(n int, model, text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": fmt.Sprintf("resp_cache%04d", n), "object": "response", "status": "completed", "model": model,
		"output": []any{map[string]any{"id": fmt.Sprintf("msg_cache%04d", n), "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}},
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 20, "total_tokens": 120},
	})
	return b
}

// postResponses posts a Responses API request of input items to the
// gateway at url and returns the reply's output items.
func postResponses(tb *testing.T, url string, headers map[string]string, input []json.RawMessage) []json.RawMessage {
	tb.Helper()
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "input": input})
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/responses", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Output []json.RawMessage `json:"output"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || len(out.Output) == 0 {
		tb.Fatalf("responses: %d %s", resp.StatusCode, b)
	}
	return out.Output
}

// replayForCache replays turns through a fresh gateway and measures the
// upstream prompts: as Chat Completions requests, or, with responses, as
// a Responses API client that holds its history (fullHistory) and resends
// its input and the provider's output items.
func replayForCache(tb *testing.T, turns int, fullHistory bool, mutate func(*config.Config)) cacheRun {
	return replayCache(tb, turns, fullHistory, false, mutate)
}

func replayCache(tb *testing.T, turns int, fullHistory, responses bool, mutate func(*config.Config)) cacheRun {
	tb.Helper()
	r := rand.New(rand.NewPCG(28, 4))
	var bodies [][]byte
	replies := rand.New(rand.NewPCG(28, 5))
	up := upstreamtest.New(tb, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		// memgate's own side-model calls (fact extraction, the
		// summariser: both ask for JSON) are not the conversation's.
		if bytes.Contains(body, []byte(extractionMarker)) || bytes.Contains(body, []byte(`"response_format"`)) {
			recallUpstream().ServeHTTP(w, req)
			return
		}
		bodies = append(bodies, body)
		if req.URL.Path == "/v1/responses" {
			w.Header().Set("Content-Type", "application/json")
			w.Write(responsesReply(len(bodies), "gpt-4o-mini", cacheReply(replies)))
			return
		}
		upstreamtest.Chat(upstreamtest.Reply{Content: cacheReply(replies)}).ServeHTTP(w, req)
	}))
	// The default configuration (compaction, recall, extraction on), its
	// side models answered by the fake upstream (summaries fall back to the
	// extractive summariser).
	cfg := storeConfigs(tb, up)["sqlite"](tb)
	if mutate != nil {
		mutate(&cfg)
	}
	g := startGateway(tb, cfg)
	var history []map[string]any
	var items []json.RawMessage // a Responses client's input
	h := map[string]string{"X-Memory-User": "cache-user", "X-Memory-Budget": "4000"}
	if !fullHistory {
		h["X-Memory-Conversation"] = "long-chat"
	}
	for i := range turns {
		if responses {
			q, _ := json.Marshal(user(cacheTurn(r, i)))
			in := []json.RawMessage{q}
			if fullHistory {
				in = append(items, q)
			}
			items = append(in[:len(in):len(in)], postResponses(tb, g.URL, h, in)...)
			if !fullHistory {
				waitStored(tb, g, memory.Identity{Tenant: memory.DefaultTenant, User: "cache-user", Conversation: "long-chat"}, 2*(i+1))
			}
			continue
		}
		msg := user(cacheTurn(r, i))
		msgs := []map[string]any{msg}
		if fullHistory {
			msgs = append(history, msg)
		}
		res := chat(tb, g.URL, h, false, msgs...)
		if res.Status != http.StatusOK {
			tb.Fatalf("turn %d: %d %s", i, res.Status, res.Body)
		}
		var reply struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(res.Body, &reply); err != nil || len(reply.Choices) == 0 {
			tb.Fatalf("turn %d: reply %s", i, res.Body)
		}
		history = append(history, msg, assistant(reply.Choices[0].Message.Content))
		if !fullHistory {
			// As a person replies seconds later: the turn is stored
			// before the next one is asked.
			waitStored(tb, g, memory.Identity{Tenant: memory.DefaultTenant, User: "cache-user", Conversation: "long-chat"}, len(history))
		}
	}
	var run cacheRun
	for i := 1; i < len(bodies); i++ {
		cur := bodies[i]
		if len(cur) < 4000 {
			continue
		}
		repeated := float64(commonPrefix(cur, bodies[i-1]))
		total := float64(len(cur))
		// The cacheable part ends where the recalled block starts (the
		// last memory block), else at the current turn.
		stable := total
		if k := bytes.LastIndex(cur, []byte(`"content":"<memory>`)); k > 0 && k > bytes.Index(cur, []byte(`"content":"<memory>`)) {
			stable = float64(k)
		}
		repeated = min(repeated, total)
		written := max(stable-repeated, 0)
		run.prompts++
		run.share += repeated / total
		run.openai50 += 0.5 * repeated / total
		run.openai75 += 0.75 * repeated / total
		run.ant += 1 - (0.1*min(repeated, stable)+1.25*written+(total-max(stable, repeated))+max(repeated-stable, 0))/total
	}
	if run.prompts > 0 {
		n := float64(run.prompts)
		run.share, run.openai50, run.openai75, run.ant = run.share/n, run.openai50/n, run.openai75/n, run.ant/n
	}
	return run
}

// TestPromptCacheShare reports, for each client style, the mean share of
// each prompt (4,000 characters or more) that repeats the previous
// request's prefix, and the estimated input-cost saving at OpenAI's and
// Anthropic's cache prices (see the assumptions above), as one line per
// style that `make bench` folds into BENCHMARKS.md:
//
//	prompt-cache <style> prompts=<n> share=<x> openai50=<x> openai75=<x> anthropic=<x>
//
// It asserts the stepped layout's floor: well over a third of each prompt
// repeats on average (before it, 17-22 % here). The share moves with when
// background compaction lands between turns (0.49-0.57 newest-only with
// recall filling what the window leaves), so the floor keeps a margin.
func TestPromptCacheShare(t *testing.T) {
	if testing.Short() {
		t.Skip("a long replay")
	}
	for _, style := range []struct {
		name            string
		full, responses bool
	}{{"newest-only", false, false}, {"full-history", true, false}, {"full-history-responses", true, true}} {
		t.Run(style.name, func(t *testing.T) {
			run := replayCache(t, 100, style.full, style.responses, nil)
			t.Logf("prompt-cache %s prompts=%d share=%.3f openai50=%.3f openai75=%.3f anthropic=%.3f",
				style.name, run.prompts, run.share, run.openai50, run.openai75, run.ant)
			if run.prompts < 20 || run.share < 0.35 {
				t.Errorf("%d prompts, mean repeated share %.3f", run.prompts, run.share)
			}
		})
	}
}
