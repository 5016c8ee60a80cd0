package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/memgate/memgate/internal/dialect/sse"
	"github.com/memgate/memgate/internal/memory"
)

// Stream reassembles a streamed chat completion for capture. It is an
// io.Writer fed the raw event stream, in whatever pieces the relay copies
// it (sse.Decoder: multi-line data fields joined, CRLF and CR line ends,
// comments skipped), and passes each event but the [DONE] sentinel to a
// StreamReply. It is used by one goroutine.
type Stream struct {
	reply *StreamReply
	dec   *sse.Decoder
	err   error
	done  bool // the [DONE] sentinel arrived
	// wholeAtHangUp: Result would have returned the reply when HangUp
	// was called.
	wholeAtHangUp bool
}

// NewStream returns a Stream that gives up (every later Write and Result
// fail) once more than limit bytes were written; limit <= 0 means none.
func NewStream(limit int64) *Stream {
	s := &Stream{reply: NewStreamReply()}
	s.dec = sse.NewDecoder(limit, func(ev sse.Event) error {
		switch p := bytes.TrimSpace(ev.Data); {
		case string(p) == "[DONE]":
			s.done = true
		case len(p) > 0:
			return s.reply.AddEvent(ev.Type, p)
		}
		return nil
	})
	return s
}

// Write feeds the next piece of the stream; it fails with the first event
// the StreamReply rejects.
func (s *Stream) Write(chunk []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if _, s.err = s.dec.Write(chunk); s.err != nil {
		return 0, s.err
	}
	return len(chunk), nil
}

// Result returns the reassembled reply (see StreamReply.Result). A last
// event the upstream did not end with a blank line still counts. It fails
// with the error a Write failed with (an event StreamReply rejects, a
// stream over the limit), and with memory.ErrInvalid when the stream
// ended before its end — neither the [DONE] sentinel nor a finish_reason
// of choice 0 arrived (some upstreams send one without the other), and
// no error event broke it off — as the Anthropic and Responses streams
// fail without their terminal events: an upstream cut off mid-answer
// that still ended its body cleanly must not be stored as a whole reply.
func (s *Stream) Result() (memory.Message, *memory.Usage, error) {
	if s.err != nil {
		return memory.Message{}, nil, fmt.Errorf("chat stream: %w", s.err)
	}
	if _, err := s.dec.Write([]byte("\n\n")); err != nil {
		return memory.Message{}, nil, fmt.Errorf("chat stream: %w", err)
	}
	if !s.done && s.reply.FinishReason() == "" && s.reply.Failed() == "" && s.reply.chunks > 0 {
		return memory.Message{}, nil, fmt.Errorf("%w: chat stream ended before [DONE] or a finish_reason", memory.ErrInvalid)
	}
	return s.reply.Result()
}

// HangUp notes that the client hung up after the events written so far,
// and reports whether they hold a whole answer: choice 0's finish_reason
// (or [DONE]) arrived, and only the usage chunk and [DONE] may follow.
func (s *Stream) HangUp() bool {
	answered := s.err == nil && (s.done || s.reply.FinishReason() != "")
	s.wholeAtHangUp = answered || s.err == nil && (s.reply.Failed() != "" || s.reply.chunks == 0)
	return answered
}

// HungUpResult returns the reply as Result did when HangUp was called:
// the reply, with what followed (the usage), when it was whole then, else
// memory.ErrInvalid.
func (s *Stream) HungUpResult() (memory.Message, *memory.Usage, error) {
	if !s.wholeAtHangUp {
		return memory.Message{}, nil, fmt.Errorf("%w: chat stream not whole when its client hung up", memory.ErrInvalid)
	}
	return s.Result()
}

// StreamReply reassembles the assistant message of a streamed chat
// completion from its chunks: content, refusal and reasoning
// (reasoning_content, reasoning) deltas concatenated, reasoning_details
// merged by index (streamDetails), tool calls merged by
// index, the finish reason, and the usage of the final usage chunk. Only
// choice 0 is kept. An error event in the stream (a chunk carrying an error
// object, or an SSE event of type "error") marks the reply failed: what was
// streamed before it is the reply, marked with memory.FailedField. A
// StreamReply is used by one goroutine.
type StreamReply struct {
	role         string
	content      strings.Builder
	sawContent   bool
	refusal      strings.Builder
	reasoning    map[string]*strings.Builder // by field name
	details      streamDetails
	failed       string // the error event's message, when one came
	calls        map[int]*streamCall
	alias        map[int]int // delta index → slot in calls, when they differ
	next         int         // a slot after every tool call seen so far
	fn           *streamFunction
	finishReason string
	usage        *memory.Usage
	chunks       int
}

// maxStreamToolCalls bounds the tool calls of one streamed reply. Far
// more than any model makes at once, it stops an upstream that streams
// empty deltas at ever new indices (about 12 bytes each, a ~60-byte call
// reassembled and a slot held for each) from making a reply that holds and
// stores many times what the capture cap lets through.
const maxStreamToolCalls = 1024

// streamCall is a tool call being streamed. Its pieces are joined in
// builders, so that many small ones cost time linear in their length.
type streamCall struct {
	id  string // never joined: another id is another call
	typ strings.Builder
	fn  streamFunction
}

// streamFunction is a function (a tool call's, or a legacy function_call)
// being streamed.
type streamFunction struct {
	name, args strings.Builder
}

// function returns the function streamed so far.
func (f *streamFunction) function() Function {
	return Function{Name: f.name.String(), Arguments: f.args.String()}
}

// streamChunk is the part of a chat.completion.chunk StreamReply reads.
type streamChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
			Refusal *string `json:"refusal"`
			// Reasoning text, as DeepSeek-style (reasoning_content) and
			// OpenRouter-style (reasoning) chat APIs stream it.
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			// ReasoningDetails are pieces of the reply's typed
			// reasoning (ReasoningDetails), as OpenRouter streams it.
			ReasoningDetails json.RawMessage `json:"reasoning_details"`
			ToolCalls        []struct {
				Index    int      `json:"index"`
				ID       string   `json:"id"`
				Type     string   `json:"type"`
				Function Function `json:"function"`
			} `json:"tool_calls"`
			FunctionCall *Function `json:"function_call"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *memory.Usage   `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// NewStreamReply returns an empty StreamReply.
func NewStreamReply() *StreamReply {
	return &StreamReply{calls: map[int]*streamCall{}, alias: map[int]int{}, reasoning: map[string]*strings.Builder{}}
}

// Add folds in one chunk: data is the JSON payload of one SSE "data:"
// event (never the [DONE] sentinel). It fails with memory.ErrInvalid on a
// payload that is not JSON, or one that brings the reply past
// maxStreamToolCalls tool calls. A chunk carrying an error object marks
// the reply failed (see AddEvent).
func (s *StreamReply) Add(data []byte) error { return s.AddEvent("message", data) }

// AddEvent folds in one SSE event of type typ ("message" for unnamed
// events): an "error" event, or a payload carrying an error object, marks
// the reply failed with the error's message; any other is a chunk (Add).
func (s *StreamReply) AddEvent(typ string, data []byte) error {
	var c streamChunk
	if err := json.Unmarshal(data, &c); err != nil {
		if typ == "error" {
			s.fail(data)
			return nil
		}
		return fmt.Errorf("%w: stream chunk: %v", memory.ErrInvalid, err)
	}
	if typ == "error" {
		s.fail(data)
		return nil
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		s.fail(c.Error)
		return nil
	}
	s.chunks++
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		d := ch.Delta
		if d.Role != "" {
			s.role = d.Role
		}
		if d.Content != nil {
			s.content.WriteString(*d.Content)
			s.sawContent = true
		}
		if d.Refusal != nil {
			s.refusal.WriteString(*d.Refusal)
		}
		s.addReasoning("reasoning_content", d.ReasoningContent)
		s.addReasoning("reasoning", d.Reasoning)
		if err := s.details.add(d.ReasoningDetails); err != nil {
			return err
		}
		for _, tc := range d.ToolCalls {
			slot, ok := s.alias[tc.Index]
			if !ok {
				slot = tc.Index
			}
			cur := s.calls[slot]
			if cur != nil && tc.ID != "" && cur.id != "" && tc.ID != cur.id {
				// A different call at the same index: an upstream that leaves
				// index at 0 and sends each call whole. Give it its own slot.
				slot = s.next
				s.alias[tc.Index] = slot
				cur = nil
			}
			if cur == nil {
				if len(s.calls) == maxStreamToolCalls {
					return fmt.Errorf("%w: stream has more than %d tool calls", memory.ErrInvalid, maxStreamToolCalls)
				}
				cur = &streamCall{}
				s.calls[slot] = cur
				s.next = max(s.next, slot+1)
			}
			if tc.ID != "" {
				cur.id = tc.ID // the first, or the same again
			}
			mergeInto(&cur.typ, tc.Type)
			mergeInto(&cur.fn.name, tc.Function.Name)
			cur.fn.args.WriteString(tc.Function.Arguments)
		}
		if d.FunctionCall != nil {
			if s.fn == nil {
				s.fn = &streamFunction{}
			}
			mergeInto(&s.fn.name, d.FunctionCall.Name)
			s.fn.args.WriteString(d.FunctionCall.Arguments)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finishReason = *ch.FinishReason
		}
	}
	return nil
}

// mergeInto merges a streamed identifier piece into b: the first piece
// sets it, a repetition of the whole value (some upstreams resend it on
// every chunk) is ignored, and anything else is appended — in time linear
// in the pieces (b.String does not copy).
func mergeInto(b *strings.Builder, piece string) {
	if piece != "" && piece != b.String() {
		b.WriteString(piece)
	}
}

// FinishReason returns the finish reason of choice 0 ("" if none arrived).
func (s *StreamReply) FinishReason() string { return s.finishReason }

// Result returns the reassembled assistant message — its Raw JSON-equal to
// the message object a non-streamed request would have returned, as read by
// ReplyFromJSON — and the usage (nil when the stream reported none). It fails
// with memory.ErrInvalid when no chunk arrived.
func (s *StreamReply) Result() (memory.Message, *memory.Usage, error) {
	if s.chunks == 0 && s.failed == "" {
		return memory.Message{}, nil, fmt.Errorf("%w: empty stream", memory.ErrInvalid)
	}
	fields := map[string]json.RawMessage{}
	put := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%w: encode %s: %v", memory.ErrInvalid, key, err)
		}
		fields[key] = b
		return nil
	}
	role := s.role
	if role == "" {
		role = "assistant"
	}
	if err := put("role", role); err != nil {
		return memory.Message{}, nil, err
	}
	if s.sawContent {
		if err := put("content", s.content.String()); err != nil {
			return memory.Message{}, nil, err
		}
	}
	if s.refusal.Len() > 0 {
		if err := put("refusal", s.refusal.String()); err != nil {
			return memory.Message{}, nil, err
		}
	}
	if len(s.calls) > 0 {
		idx := make([]int, 0, len(s.calls))
		for i := range s.calls {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		calls := make([]ToolCall, 0, len(idx))
		for _, i := range idx {
			c := s.calls[i]
			tc := ToolCall{ID: c.id, Type: c.typ.String(), Function: c.fn.function()}
			if tc.Type == "" {
				tc.Type = "function"
			}
			calls = append(calls, tc)
		}
		if err := put("tool_calls", calls); err != nil {
			return memory.Message{}, nil, err
		}
	}
	if s.fn != nil {
		if err := put("function_call", s.fn.function()); err != nil {
			return memory.Message{}, nil, err
		}
	}
	for field, b := range s.reasoning {
		if b.Len() > 0 {
			if err := put(field, b.String()); err != nil {
				return memory.Message{}, nil, err
			}
		}
	}
	if d, err := s.details.result(); err != nil {
		return memory.Message{}, nil, err
	} else if d != nil {
		fields[ReasoningDetails] = d
		seal(fields, s.details.lossless)
	}
	msg, err := canonical(fields)
	if err != nil {
		return memory.Message{}, nil, err
	}
	if s.failed != "" {
		if msg, err = memory.MarkFailed(msg, s.failed); err != nil {
			return memory.Message{}, nil, err
		}
	}
	return msg, s.usage, nil
}

// Failed returns the message of the error event that broke the stream off,
// or "" when none came.
func (s *StreamReply) Failed() string { return s.failed }

// addReasoning appends a reasoning delta to field.
func (s *StreamReply) addReasoning(field string, delta *string) {
	if delta == nil || *delta == "" {
		return
	}
	b := s.reasoning[field]
	if b == nil {
		b = &strings.Builder{}
		s.reasoning[field] = b
	}
	b.WriteString(*delta)
}

// maxFailure caps the error message kept with a failed reply.
const maxFailure = 512

// fail marks the reply failed with the message of an error payload: the
// error object's message, else its text.
func (s *StreamReply) fail(payload []byte) {
	var e struct {
		Message string `json:"message"`
		Error   struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := ""
	if json.Unmarshal(payload, &e) == nil {
		msg = e.Error.Message
		if msg == "" {
			msg = e.Message
		}
	}
	if msg == "" {
		var str string
		if json.Unmarshal(payload, &str) == nil {
			msg = str
		}
	}
	if msg == "" {
		msg = "upstream error event"
	}
	if len(msg) > maxFailure {
		msg = msg[:maxFailure]
	}
	if s.failed == "" {
		s.failed = msg
	}
}
