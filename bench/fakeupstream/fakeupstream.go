// Package fakeupstream is a fast stand-in for an OpenAI-compatible API, for
// benchmarks: POST /v1/chat/completions answers a fixed chat.completion, or a
// fixed SSE stream when the request asks for "stream": true, after an
// optional fixed latency. A request for a JSON object (response_format
// json_object: memgate's fact extraction and summariser calls) gets a valid
// one, as a real model would give: fixed, except that a summary repeats the
// first words of the messages it summarises. It does as little work as a real server can, so a
// benchmark measures the proxy in front of it rather than the upstream.
package fakeupstream

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Options configure the fake upstream.
type Options struct {
	// Latency is waited before the response headers (default 0).
	Latency time.Duration
	// ChunkInterval is waited between stream events (default 0).
	ChunkInterval time.Duration
	// Chunks is the number of content deltas in a stream (default 8).
	Chunks int
}

// Reply is the content of the fixed non-streaming reply.
const Reply = "Hello! This is a fixed benchmark reply from the fake upstream."

// Completion is the fixed non-streaming reply body.
const Completion = `{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,` +
	`"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant",` +
	`"content":"` + Reply + `","refusal":null},` +
	`"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":25,"completion_tokens":14,` +
	`"total_tokens":39},"system_fingerprint":"fp_bench"}`

// JSONReply is the content of the reply to a request for a JSON object. It
// satisfies both structured calls memgate makes of a model: fact extraction
// (no facts in a greeting) and the rolling summary.
const JSONReply = `{"facts":[],"summary":"The user asked the assistant for a short greeting, several times.",` +
	`"key_events":["The user asked for a greeting."],"preserved":{"numbers":[],"dates":[],"decisions":[]}}`

// jsonCompletion is the reply body carrying JSONReply.
var jsonCompletion = fmt.Sprintf(`{"id":"chatcmpl-bench-json","object":"chat.completion","created":1700000000,`+
	`"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":%q,"refusal":null},`+
	`"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":40,"total_tokens":160}}`, JSONReply)

// chunk renders one SSE chat.completion.chunk event.
func chunk(delta, finish string) []byte {
	if finish == "" {
		finish = "null"
	} else {
		finish = `"` + finish + `"`
	}
	return fmt.Appendf(nil, `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,`+
		`"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_bench","choices":[{"index":0,`+
		`"delta":%s,"logprobs":null,"finish_reason":%s}]}`+"\n\n", delta, finish)
}

// streamWords are the content deltas of the streamed reply, in turn.
var streamWords = strings.Fields("Hello! This is a fixed benchmark reply from the fake upstream, streamed in pieces.")

// StreamedReply is the content of the fixed streamed reply of chunks
// deltas, as a client puts it together.
func StreamedReply(chunks int) string {
	var b strings.Builder
	for i := range chunks {
		b.WriteString(streamWords[i%len(streamWords)] + " ")
	}
	return b.String()
}

// Stream returns the events of the fixed streamed reply: a role delta,
// chunks content deltas, a finish chunk, a usage chunk and [DONE].
func Stream(chunks int) [][]byte {
	ev := [][]byte{chunk(`{"role":"assistant","content":""}`, "")}
	for i := range chunks {
		ev = append(ev, chunk(fmt.Sprintf(`{"content":%q}`, streamWords[i%len(streamWords)]+" "), ""))
	}
	ev = append(ev, chunk(`{}`, "stop"),
		[]byte(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,`+
			`"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":25,`+
			`"completion_tokens":`+fmt.Sprint(chunks)+`,"total_tokens":`+fmt.Sprint(25+chunks)+"}}\n\n"),
		[]byte("data: [DONE]\n\n"))
	return ev
}

// Handler returns the fake upstream's handler. It serves
// /v1/chat/completions (POST) and /v1/models (GET); everything else is 404
// in OpenAI's error shape.
func Handler(opts Options) http.Handler {
	if opts.Chunks <= 0 {
		opts.Chunks = 8
	}
	events := Stream(opts.Chunks)
	completion, structured := []byte(Completion), []byte(jsonCompletion)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		if opts.Latency > 0 {
			time.Sleep(opts.Latency)
		}
		if seen, ok := RecallSeen(body); ok {
			w.Header().Set(RecallHeader, fmt.Sprint(seen))
		}
		if !wantsStream(body) {
			reply := completion
			if wantsJSON(body) {
				reply = structured
				if sum := summaryCompletion(body); sum != nil {
					reply = sum
				}
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(len(reply)))
			w.Write(reply)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		rc := http.NewResponseController(w)
		for i, ev := range events {
			if i > 0 && opts.ChunkInterval > 0 {
				time.Sleep(opts.ChunkInterval)
			}
			if _, err := w.Write(ev); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","created":1700000000,"owned_by":"bench"}]}`)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"message":"not found","type":"invalid_request_error","param":null,"code":null}}`)
	})
	return mux
}

// RecallMarker asks the fake upstream whether the prompt holds a token: a
// message containing RecallMarker followed by the token (letters and
// digits; the last marker in the body counts, the newest turn being last)
// gets the answer in the RecallHeader response header, "true" when
// the token occurs in the request body other than after the marker. The
// benchmark's read-your-writes check puts each turn's token in the next
// turn's marker.
const (
	RecallMarker = "recall-check:"
	RecallHeader = "X-Fake-Recalled"
)

// RecallSeen reports whether body holds the token its RecallMarker names
// anywhere else; ok is false without a marker.
func RecallSeen(body []byte) (seen, ok bool) {
	i := bytes.LastIndex(body, []byte(RecallMarker)) // the newest turn is last
	if i < 0 {
		return false, false
	}
	tok := body[i+len(RecallMarker):]
	n := 0
	for n < len(tok) && (tok[n] >= 'a' && tok[n] <= 'z' || tok[n] >= '0' && tok[n] <= '9') {
		n++
	}
	if n == 0 {
		return false, false
	}
	return bytes.Count(body, tok[:n]) >= 2, true
}

// wantsJSON reports whether a request asks for a JSON object
// (response_format {"type": "json_object"}), scanning the bytes like
// wantsStream.
func wantsJSON(body []byte) bool {
	return bytes.Contains(body, []byte(`"response_format"`)) && bytes.Contains(body, []byte(`"json_object"`))
}

// wantsStream reports whether a request body sets "stream": true. It scans
// the bytes instead of decoding the JSON, which keeps the fake upstream cheap;
// benchmark bodies are compact JSON.
func wantsStream(body []byte) bool {
	i := bytes.Index(body, []byte(`"stream"`))
	if i < 0 {
		return false
	}
	rest := bytes.TrimLeft(body[i+len(`"stream"`):], " \t\r\n")
	rest = bytes.TrimPrefix(rest, []byte(":"))
	rest = bytes.TrimLeft(rest, " \t\r\n")
	return bytes.HasPrefix(rest, []byte("true"))
}
