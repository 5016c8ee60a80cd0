// Command standin is the provider the manual client harness
// (testdata/sdk/clients, see its README.md) runs `gateway serve` in front
// of: Chat Completions as internal/upstreamtest writes them, the Messages
// and Responses APIs as the dialecttest fake does (tool calls when tools
// are offered and no result is in), a fixed JSON object for structured
// output (response_format / text.format json_schema, a forced tool,
// output_format), and a fact for memgate's own JSON calls (fact
// extraction, summaries). Every request but memgate's own is appended to
// -log as one JSON line.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// structured is the object every structured-output request gets: the
// harness scripts ask for {city: string, temp: number}.
const structured = `{"city":"Porto","temp":18}`

// sideJSON answers memgate's own JSON calls: one fact, and a summary.
const sideJSON = `{"facts":[{"type":"profile","key":"home city","value":"Lisbon","confidence":0.95}],` +
	`"summary":"The user said they live in Lisbon.","key_events":["The user said they live in Lisbon."],` +
	`"preserved":{"numbers":[],"dates":[],"decisions":[]}}`

func main() {
	addr := flag.String("addr", "127.0.0.1:9099", "listen address")
	logPath := flag.String("log", "standin.jsonl", "file the requests are appended to")
	flag.Parse()
	fake := dialecttest.StartUpstream()
	defer fake.Close()
	fakeURL, _ := url.Parse(fake.URL)
	toFake := httputil.NewSingleHostReverseProxy(fakeURL)
	toFake.FlushInterval = -1
	out, err := os.OpenFile(*logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	defer out.Close()
	var mu sync.Mutex
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		var m map[string]json.RawMessage
		json.Unmarshal(b, &m)
		side := strings.Contains(string(m["response_format"]), "json_object")
		if !side {
			line, _ := json.Marshal(map[string]any{"path": r.URL.Path, "header": r.Header, "body": json.RawMessage(b)})
			mu.Lock()
			out.Write(append(line, '\n'))
			mu.Unlock()
		}
		switch r.URL.Path {
		case "/v1/chat/completions":
			chat(m, side).ServeHTTP(w, r)
		case "/v1/responses":
			if strings.Contains(string(m["text"]), "json_schema") {
				writeJSON(w, map[string]any{"id": "resp_structured", "object": "response", "created_at": time.Now().Unix(),
					"status": "completed", "error": nil, "incomplete_details": nil, "model": "gpt-4o-mini",
					"output": []any{map[string]any{"id": "msg_structured", "type": "message", "status": "completed", "role": "assistant",
						"content": []any{map[string]any{"type": "output_text", "text": structured, "annotations": []any{}}}}},
					"usage": map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
						"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}})
				return
			}
			toFake.ServeHTTP(w, r)
		case "/v1/messages":
			var tc struct{ Type, Name string }
			json.Unmarshal(m["tool_choice"], &tc)
			if tc.Type != "tool" && m["output_format"] == nil && !strings.Contains(string(m["output_config"]), "json_schema") {
				toFake.ServeHTTP(w, r)
				return
			}
			block, stop := map[string]any{"type": "text", "text": structured}, "end_turn"
			if tc.Type == "tool" {
				block, stop = map[string]any{"type": "tool_use", "id": "toolu_structured", "name": tc.Name, "input": json.RawMessage(structured)}, "tool_use"
			}
			writeJSON(w, map[string]any{"id": "msg_structured", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
				"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 5}})
		default:
			http.NotFound(w, r)
		}
	})
	log.Printf("stand-in provider on http://%s (requests to %s)", *addr, *logPath)
	log.Fatal(http.ListenAndServe(*addr, h))
}

// chat answers a chat completion: memgate's own JSON calls with sideJSON,
// structured output with the object, a forced function with a call to it,
// a tool result with its text, offered tools with a get_weather call, and
// anything else with "You said: " and the last user text.
func chat(m map[string]json.RawMessage, side bool) http.Handler {
	if side {
		return upstreamtest.Chat(upstreamtest.Reply{Content: sideJSON})
	}
	if strings.Contains(string(m["response_format"]), "json_schema") {
		return upstreamtest.Chat(upstreamtest.Reply{Content: structured})
	}
	var tc struct {
		Function struct{ Name string } `json:"function"`
	}
	json.Unmarshal(m["tool_choice"], &tc)
	var msgs []json.RawMessage
	json.Unmarshal(m["messages"], &msgs)
	var last, lastUser memory.Message
	for _, raw := range msgs {
		if mm, err := memory.ParseMessage(raw); err == nil {
			last = mm
			if mm.Role == "user" {
				lastUser = mm
			}
		}
	}
	switch {
	case tc.Function.Name != "":
		return upstreamtest.Chat(upstreamtest.Reply{ToolCalls: []upstreamtest.ToolCall{{ID: "call_structured", Name: tc.Function.Name, Arguments: structured}}})
	case last.Role == "tool":
		return upstreamtest.Chat(upstreamtest.Reply{Content: "The tool says: " + last.Content + "."})
	case len(m["tools"]) > 2:
		id := fmt.Sprintf("call_w%d", time.Now().UnixNano()%100000)
		return upstreamtest.Chat(upstreamtest.Reply{ToolCalls: []upstreamtest.ToolCall{{ID: id, Name: "get_weather", Arguments: `{"city":"Porto"}`}}})
	}
	return upstreamtest.Chat(upstreamtest.Reply{Content: "You said: " + lastUser.Content})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
