package responses

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/memgate/memgate/internal/dialect/sse"
	"github.com/memgate/memgate/internal/memory"
)

// Stream reassembles a streamed Responses API reply for capture. It is an
// io.Writer fed the raw event stream, in whatever pieces the relay copies
// it, and never holds more than its limit. It is used by one goroutine.
type Stream struct {
	dec   *sse.Decoder
	items map[int]*streamItem
	// parts counts the items, the text and summary builders and the
	// content parts held; over marks a stream that went past
	// maxStreamParts.
	parts  int
	over   bool
	final  *response
	id     string // the response's id, from the first event naming it
	failed string // why the response failed, when it did
	err    error
	// noTools: the request offered no tools, so its reply is whole once
	// its message is (answered).
	noTools bool
	// hungUp holds the output indices of the items when HangUp was
	// called, the reply whole then (answered); nil when it was not.
	hungUp []int
}

// maxStreamParts bounds the output items, texts and summaries of one
// streamed reply: far more than a reply has, it stops an upstream that
// streams empty deltas at ever new indices from making the capture hold
// many times the stream.
const maxStreamParts = 4096

// streamItem is an output item being reassembled from its events.
type streamItem struct {
	item
	done  bool // the item is whole: output_item.done arrived
	texts map[int]*strings.Builder
	// contentDone holds a message's content parts by index, each added
	// (false) or done (true: content_part.done arrived).
	contentDone map[int]bool
	refusal     strings.Builder
	// refusalDone: response.refusal.done arrived.
	refusalDone bool
	args        strings.Builder
	sawArgs     bool
	summaries   map[int]*strings.Builder
}

// streamEvent is the part of a stream event Stream reads.
type streamEvent struct {
	Type         string    `json:"type"`
	OutputIndex  int       `json:"output_index"`
	ContentIndex int       `json:"content_index"`
	SummaryIndex int       `json:"summary_index"`
	Item         *item     `json:"item"`
	Delta        string    `json:"delta"`
	Text         *string   `json:"text"`
	Refusal      *string   `json:"refusal"`
	Arguments    *string   `json:"arguments"`
	Response     *response `json:"response"`
	Message      string    `json:"message"`
}

// NewStream returns a Stream that gives up (every later Write and Result
// fail) once more than limit bytes were written; limit <= 0 means none.
func NewStream(limit int64) *Stream {
	s := &Stream{items: map[int]*streamItem{}}
	s.dec = sse.NewDecoder(limit, s.event)
	return s
}

// NewToollessStream returns a NewStream for the reply to a request that
// offered no tools: such a reply is some reasoning and one message, whole
// once that message is, before response.completed (see Result), unless
// the message is a preamble (phase "commentary"), which more output
// follows. A request with tools may go on after its message (a function
// call after a preamble), so its reply is whole only at the response's
// end.
func NewToollessStream(limit int64) *Stream {
	s := NewStream(limit)
	s.noTools = true
	return s
}

// Write feeds the next piece of the event stream.
func (s *Stream) Write(p []byte) (int, error) { return s.dec.Write(p) }

// ID is the response's id, from the first event naming it ("" when none
// did).
func (s *Stream) ID() string { return s.id }

// at returns the item at an output index, creating it; past
// maxStreamParts it returns one not held, and marks the stream over.
func (s *Stream) at(i int) *streamItem {
	it := s.items[i]
	if it == nil {
		it = &streamItem{texts: map[int]*strings.Builder{}, contentDone: map[int]bool{}, summaries: map[int]*strings.Builder{}}
		if !s.hold() {
			return it
		}
		s.items[i] = it
	}
	return it
}

// builder returns the builder for index i of m, creating it; past
// maxStreamParts it returns one not held, and marks the stream over.
func (s *Stream) builder(m map[int]*strings.Builder, i int) *strings.Builder {
	b := m[i]
	if b == nil {
		b = &strings.Builder{}
		if !s.hold() {
			return b
		}
		m[i] = b
	}
	return b
}

// hold counts one more part held, and reports whether it may be: past
// maxStreamParts it marks the stream over instead.
func (s *Stream) hold() bool {
	if s.parts == maxStreamParts {
		s.over = true
		return false
	}
	s.parts++
	return true
}

// event folds in one event: output items as added, their content parts
// as added and done, their text, refusal, argument and reasoning-summary
// deltas and done events, the whole item at response.output_item.done,
// and the final response (usage, and its output when the provider
// includes it) at response.completed or response.incomplete.
// response.failed and error mark the reply failed (see Result); other
// events (created, in_progress) carry nothing more. It fails with
// memory.ErrInvalid once the stream opens more than maxStreamParts items,
// texts, summaries and content parts.
func (s *Stream) event(ev sse.Event) error {
	var e streamEvent
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return fmt.Errorf("%w: stream event %q: %v", memory.ErrInvalid, ev.Type, err)
	}
	if e.Response != nil && s.id == "" {
		s.id = e.Response.ID
	}
	switch e.Type {
	case "response.output_item.added", "response.output_item.done":
		if e.Item == nil {
			return fmt.Errorf("%w: %s without item", memory.ErrInvalid, e.Type)
		}
		it := s.at(e.OutputIndex)
		it.item = *e.Item
		it.done = e.Type == "response.output_item.done"
	case "response.content_part.added", "response.content_part.done":
		it := s.at(e.OutputIndex)
		if _, ok := it.contentDone[e.ContentIndex]; ok || s.hold() {
			it.contentDone[e.ContentIndex] = it.contentDone[e.ContentIndex] || e.Type == "response.content_part.done"
		}
	case "response.output_text.delta":
		s.builder(s.at(e.OutputIndex).texts, e.ContentIndex).WriteString(e.Delta)
	case "response.output_text.done":
		if e.Text != nil {
			it := s.at(e.OutputIndex)
			b := s.builder(it.texts, e.ContentIndex)
			b.Reset()
			b.WriteString(*e.Text)
		}
	case "response.refusal.delta":
		s.at(e.OutputIndex).refusal.WriteString(e.Delta)
	case "response.refusal.done":
		if e.Refusal != nil {
			it := s.at(e.OutputIndex)
			it.refusal.Reset()
			it.refusal.WriteString(*e.Refusal)
			it.refusalDone = true
		}
	case "response.function_call_arguments.delta":
		it := s.at(e.OutputIndex)
		it.args.WriteString(e.Delta)
		it.sawArgs = true
	case "response.function_call_arguments.done":
		if e.Arguments != nil {
			it := s.at(e.OutputIndex)
			it.args.Reset()
			it.args.WriteString(*e.Arguments)
			it.sawArgs = true
		}
	case "response.reasoning_summary_text.delta":
		s.builder(s.at(e.OutputIndex).summaries, e.SummaryIndex).WriteString(e.Delta)
	case "response.reasoning_summary_text.done":
		if e.Text != nil {
			b := s.builder(s.at(e.OutputIndex).summaries, e.SummaryIndex)
			b.Reset()
			b.WriteString(*e.Text)
		}
	case "response.completed", "response.incomplete":
		if e.Response == nil {
			return fmt.Errorf("%w: %s without response", memory.ErrInvalid, e.Type)
		}
		s.final = e.Response
	case "response.failed":
		s.final = e.Response
		s.fail(failure(e.Response))
	case "error":
		s.fail(cmp.Or(e.Message, "upstream error event"))
	}
	if s.over {
		return fmt.Errorf("%w: stream has more than %d output items, texts and summaries", memory.ErrInvalid, maxStreamParts)
	}
	return nil
}

// fail marks the reply failed with reason, unless it already is.
func (s *Stream) fail(reason string) {
	if s.failed == "" {
		s.failed = reason
	}
}

// failure is the error message of a failed response (nil: none came).
func failure(r *response) string {
	var e struct {
		Message string `json:"message"`
	}
	if r != nil && json.Unmarshal(r.Error, &e) == nil && e.Message != "" {
		return e.Message
	}
	return "the response failed"
}

// whole returns the item as it ended: the output_item.done item when it
// came, else the item as added with its deltas folded in.
func (it *streamItem) whole() item {
	out := it.item
	if it.done {
		return out
	}
	switch out.Type {
	case "message":
		idx := make([]int, 0, len(it.texts))
		for i := range it.texts {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		var ps []part
		for _, i := range idx {
			ps = append(ps, part{Type: "output_text", Text: it.texts[i].String()})
		}
		if it.refusal.Len() > 0 {
			ps = append(ps, part{Type: "refusal", Refusal: it.refusal.String()})
		}
		out.Content, _ = json.Marshal(ps) // plain structs always encode
	case "function_call":
		if it.sawArgs {
			out.Arguments = it.args.String()
		}
	case "reasoning":
		idx := make([]int, 0, len(it.summaries))
		for i := range it.summaries {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		out.Summary = out.Summary[:0]
		for _, i := range idx {
			out.Summary = append(out.Summary, struct {
				Text string `json:"text"`
			}{it.summaries[i].String()})
		}
	}
	return out
}

// answered reports whether the stream, without its final response, holds
// the whole reply of a request that offered no tools: a message, not a
// preamble (phase "commentary"), whose item is done or every content
// part of which is (spoken), and every other item it opened done too (a
// reasoning item, or a preamble, before it).
func (s *Stream) answered() bool {
	if !s.noTools {
		return false
	}
	answer := false
	for _, it := range s.items {
		if !it.done && !(it.Type == "message" && it.spoken()) {
			return false
		}
		answer = answer || it.Type == "message" && (it.Phase == "" || it.Phase == "final_answer")
	}
	return answer
}

// spoken reports whether a message item's content parts, one at least,
// all got their content_part.done, its texts among them, and its refusal
// its done event: a part added and not done (a second text still to
// come) leaves the message unfinished.
func (it *streamItem) spoken() bool {
	if len(it.contentDone) == 0 {
		return false
	}
	for _, done := range it.contentDone {
		if !done {
			return false
		}
	}
	for i := range it.texts {
		if !it.contentDone[i] {
			return false
		}
	}
	return it.refusal.Len() == 0 || it.refusalDone
}

// HangUp notes that the client hung up after the events written so far,
// and reports whether they showed a whole answer, which the rest of the
// stream is worth reading for: a NewToollessStream's whole reply
// (answered), or a message or a function call item done, which more
// output (a call after a preamble, a second message) may follow until
// response.completed.
func (s *Stream) HangUp() bool {
	if s.dec.Err() != nil || s.failed != "" || s.over {
		return false
	}
	if s.answered() {
		s.hungUp = s.indices()
		return true
	}
	for _, it := range s.items {
		if it.done && (it.Type == "message" || it.Type == "function_call") {
			return true
		}
	}
	return false
}

// HungUpResult returns the reply as Result did when HangUp was called: a
// NewToollessStream's reply whole then, of the items it held then (a
// message begun after is left out), without usage; else
// memory.ErrInvalid (a request with tools: a call may have followed).
func (s *Stream) HungUpResult() (memory.Message, *memory.Usage, error) {
	if s.hungUp == nil {
		return memory.Message{}, nil, fmt.Errorf("%w: stream not whole when its client hung up", memory.ErrInvalid)
	}
	var r response
	for _, i := range s.hungUp {
		r.Output = append(r.Output, s.items[i].whole())
	}
	return r.reply()
}

// indices returns the output indices of the items held, in order.
func (s *Stream) indices() []int {
	idx := make([]int, 0, len(s.items))
	for i := range s.items {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	return idx
}

// Result returns the reply reassembled — equal to what ReplyFromJSON reads
// from the same response given whole — and the usage. A stream that
// carried response.failed or an error event returns what was streamed
// before it, marked with memory.FailedField (as chat's StreamReply does).
// A NewToollessStream's reply is whole, without usage, once its message
// is (answered): a stream read up to there (a client that stopped reading
// at the message's content_part.done or output_item.done) returns it.
// It fails when the stream ended without response.completed or
// response.incomplete and without such an event (with ErrNotDone too
// when an event named the response: a background response goes on
// without the stream, see ID), or exceeded the limit.
func (s *Stream) Result() (memory.Message, *memory.Usage, error) {
	if err := s.dec.Err(); err != nil {
		return memory.Message{}, nil, fmt.Errorf("responses stream: %w", err)
	}
	if s.final == nil && s.failed == "" && !s.answered() {
		if s.id != "" {
			return memory.Message{}, nil, fmt.Errorf("%w: %w: stream ended before response.completed", memory.ErrInvalid, ErrNotDone)
		}
		return memory.Message{}, nil, fmt.Errorf("%w: stream ended before response.completed", memory.ErrInvalid)
	}
	var r response
	if s.final != nil {
		r = *s.final
	}
	if len(r.Output) == 0 {
		for _, i := range s.indices() {
			r.Output = append(r.Output, s.items[i].whole())
		}
	}
	if s.failed == "" {
		return r.reply()
	}
	msg, u, err := r.message()
	if err == nil {
		msg, err = memory.MarkFailed(msg, s.failed)
	}
	if err != nil {
		return memory.Message{}, nil, err
	}
	return msg, u, nil
}
