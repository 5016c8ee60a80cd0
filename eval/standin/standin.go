// Package standin is a STAND-IN for an OpenAI-compatible upstream, used by the
// memory-quality evaluation and the demo so they run with no API key and no
// network. It is not a language model:
//
//   - chat turns get the reply a caller queued with Script, or else a
//     short, generic assistant answer chosen deterministically from the
//     user's message (it never repeats the user's specifics, so whatever
//     reaches a later prompt came from memgate);
//   - requests asking for a JSON object (response_format json_object) are
//     treated as memgate's own side calls: a summary request gets an
//     extractive summary (the sentences carrying numbers, dates, names and
//     stated goals or preferences, verbatim), a fact-extraction request gets
//     facts found by a few fixed patterns.
//
// Every chat request is recorded so callers can read exactly what memgate
// sent upstream.
package standin

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Kind tells what a recorded request was.
type Kind string

// The request kinds.
const (
	KindChat    Kind = "chat"    // an application's chat turn, forwarded by memgate
	KindSummary Kind = "summary" // memgate's summariser
	KindFacts   Kind = "facts"   // memgate's fact extraction
	KindJSON    Kind = "json"    // another JSON-object request (answered with {})
)

// Message is one chat message as the upstream received it.
type Message struct {
	Role string
	// Content is the text: a string content, or the text parts joined.
	Content string
	// Raw is the message object verbatim.
	Raw json.RawMessage
}

// Call is one recorded chat-completions request.
type Call struct {
	Kind     Kind
	Model    string
	Messages []Message
	Header   http.Header
	// Reply is the assistant text the stand-in answered with.
	Reply string
}

// Options tune the stand-in.
type Options struct {
	// NoFacts answers every fact-extraction request with no facts, as a
	// model that finds nothing would; memgate then has only its own pattern
	// detection, summaries and recall.
	NoFacts bool
}

// Server is the stand-in upstream. The zero value is not usable; call New.
type Server struct {
	opts     Options
	mu       sync.Mutex
	calls    []Call
	counts   map[Kind]int
	inflight int
	script   []string
}

// New returns a stand-in upstream; serve it with httptest or http.Server
// under the /v1 prefix.
func New(opts Options) *Server {
	return &Server{opts: opts, counts: map[Kind]int{}}
}

// chatRequest is the part of a chat-completions body the stand-in reads.
type chatRequest struct {
	Model          string            `json:"model"`
	Messages       []json.RawMessage `json:"messages"`
	Stream         bool              `json:"stream"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

// ServeHTTP answers POST /v1/chat/completions; everything else is 404 in
// the OpenAI error format.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		writeError(w, http.StatusNotFound, "the stand-in upstream only serves POST /v1/chat/completions")
		return
	}
	s.begin()
	defer s.end()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "body is not JSON: "+err.Error())
		return
	}
	call := Call{Kind: KindChat, Model: req.Model, Header: r.Header.Clone()}
	for _, raw := range req.Messages {
		call.Messages = append(call.Messages, parseMessage(raw))
	}
	if req.ResponseFormat != nil && req.ResponseFormat.Type == "json_object" {
		call.Kind, call.Reply = sideCall(call.Messages)
		if call.Kind == KindFacts && s.opts.NoFacts {
			call.Reply = `{"facts": []}`
		}
	} else {
		call.Reply = s.scripted()
		if call.Reply == "" {
			call.Reply = ChatReply(lastUser(call.Messages))
		}
	}
	s.record(call)
	if req.Stream {
		writeStream(w, req.Model, call.Reply)
		return
	}
	writeCompletion(w, req.Model, call.Reply, call.Messages)
}

// Script queues reply as the answer to the next chat turn (side calls do
// not take it): a replay makes the upstream say the second speaker's lines.
func (s *Server) Script(reply string) {
	s.mu.Lock()
	s.script = append(s.script, reply)
	s.mu.Unlock()
}

// scripted takes the next queued reply ("" when none is queued).
func (s *Server) scripted() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.script) == 0 {
		return ""
	}
	r := s.script[0]
	s.script = s.script[1:]
	return r
}

func (s *Server) begin() {
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
}

func (s *Server) end() {
	s.mu.Lock()
	s.inflight--
	s.mu.Unlock()
}

func (s *Server) record(c Call) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.counts[c.Kind]++
	s.mu.Unlock()
}

// Count returns how many requests of kind were answered so far.
func (s *Server) Count(kind Kind) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[kind]
}

// Busy returns how many requests are being answered now.
func (s *Server) Busy() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight
}

// LastChat returns the newest recorded chat turn (not a side call).
func (s *Server) LastChat() (Call, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.calls) - 1; i >= 0; i-- {
		if s.calls[i].Kind == KindChat {
			return s.calls[i], true
		}
	}
	return Call{}, false
}

// Calls returns every recorded request since the last Reset, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Reset forgets the recorded requests (the counts stay).
func (s *Server) Reset() {
	s.mu.Lock()
	s.calls = nil
	s.mu.Unlock()
}

// parseMessage reads role and text of one message.
func parseMessage(raw json.RawMessage) Message {
	var m struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(raw, &m) // a malformed message keeps an empty role
	out := Message{Role: m.Role, Raw: raw}
	var str string
	if json.Unmarshal(m.Content, &str) == nil {
		out.Content = str
		return out
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) == nil {
		var texts []string
		for _, p := range parts {
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
		out.Content = strings.Join(texts, "\n")
	}
	return out
}

// lastUser returns the text of the newest user message.
func lastUser(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// Assistant phrases: generic, free of digits, names and places.
var (
	openers = []string{"Sure, happy to help.", "Good question.", "Of course.", "Got it.", "Claro, vamos lá.", "Here is a short answer.", "Absolutely.", "Sounds good."}
	bodies  = []string{
		"Start small and keep it simple; consistency matters more than intensity, and a little planning up front saves time later.",
		"The short version is that it depends on your situation, but a good first step is to write down what you already know and what you need.",
		"Try breaking it into a few steps, do the easiest one first, and check how it feels before changing anything else.",
		"Most people find it easier when they set a regular time for it and remove small distractions from the way.",
		"A simple approach works well here: pick one option, try it for a while, and adjust based on what you notice.",
		"Uma boa ideia é começar devagar, manter a rotina e ajustar aos poucos conforme você for percebendo o que funciona.",
		"It also helps to keep notes as you go, because patterns become obvious only when you can look back over a few weeks.",
		"If something feels like too much, scale it down until it feels almost too easy, then build up gradually from there.",
		"Ask a friend to join or check in with you now and then; a bit of accountability goes a long way for most people.",
		"Keep in mind that there is rarely one right answer, so treat the first attempt as an experiment rather than a commitment.",
		"Também vale a pena revisar o que deu certo no fim de cada semana e ajustar o plano com calma, sem pressa.",
		"Finally, be kind to yourself when things slip; the goal is steady progress over time, not a perfect record.",
	}
	closers = []string{"Let me know if you want more detail.", "Want me to go deeper on any part?", "Hope that helps!", "Qualquer coisa, é só falar.", "Shall I make a checklist?"}
)

// ReplyBodies is how many body sentences a chat reply carries: with an
// opener and a closer, about 130 tokens, the length of a typical short
// assistant answer.
const ReplyBodies = 4

// ChatReply returns the stand-in's answer to a user message: an opener,
// ReplyBodies generic sentences and a closer, picked by a hash of the
// message.
func ChatReply(user string) string {
	h := fnv.New32a()
	h.Write([]byte(user))
	n := h.Sum32()
	parts := []string{openers[n%uint32(len(openers))]}
	first := int((n / 7) % uint32(len(bodies)))
	for i := range ReplyBodies {
		parts = append(parts, bodies[(first+i)%len(bodies)])
	}
	parts = append(parts, closers[(n/41)%uint32(len(closers))])
	return strings.Join(parts, " ")
}

// writeCompletion writes a chat.completion object.
func writeCompletion(w http.ResponseWriter, model, reply string, in []Message) {
	promptChars := 0
	for _, m := range in {
		promptChars += len(m.Content)
	}
	resp := map[string]any{
		"id":      "chatcmpl-standin",
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": reply},
			"finish_reason": "stop",
		}},
		// Rough counts (characters / 4): the stand-in has no tokenizer.
		"usage": map[string]int{"prompt_tokens": promptChars / 4, "completion_tokens": len(reply) / 4, "total_tokens": (promptChars + len(reply)) / 4},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp) // a client gone away is not our problem
}

// writeStream writes the reply as an SSE chunk stream, a few words a chunk.
func writeStream(w http.ResponseWriter, model, reply string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	send := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
		fmt.Fprintf(w, "data: %s\n\n", b)
		_ = rc.Flush()
	}
	send(map[string]any{"role": "assistant", "content": ""}, nil)
	words := strings.SplitAfter(reply, " ")
	for i := 0; i < len(words); i += 4 {
		send(map[string]any{"content": strings.Join(words[i:min(i+4, len(words))], "")}, nil)
	}
	send(map[string]any{}, "stop")
	fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// writeError writes an OpenAI error body.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}
