package anthropic

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/memgate/memgate/internal/dialect/chat"
	"github.com/memgate/memgate/internal/dialect/sse"
	"github.com/memgate/memgate/internal/memory"
)

// Stream reassembles a streamed Messages API reply for capture. It is an
// io.Writer fed the raw event stream, in whatever pieces the relay copies
// it, and never holds more than its limit. It is used by one goroutine.
type Stream struct {
	dec     *sse.Decoder
	blocks  map[int]*streamBlock
	usage   usage
	started bool
	// stopped is set by message_delta's stop_reason, the reply's end (its
	// final usage with it), or by message_stop.
	stopped bool
	failed  string // the error event's message, when one came
	err     error
	// wholeAtHangUp: Result would have returned the reply when HangUp
	// was called.
	wholeAtHangUp bool
	// lossy is set by a thinking or redacted_thinking block's event that
	// did not read without loss (memory.Lossless): its blocks get no
	// digest.
	lossy bool
}

// maxStreamBlocks bounds the content blocks of one streamed reply: far
// more than a reply has, it stops an upstream that streams empty blocks at
// ever new indices from making the capture hold many times the stream.
const maxStreamBlocks = 4096

// streamBlock is a content block being reassembled.
type streamBlock struct {
	block
	text      strings.Builder
	thinking  strings.Builder
	signature strings.Builder
	inputJSON strings.Builder
	sawInput  bool
}

// streamEvent is the part of a stream event Stream reads.
type streamEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		Usage *usage `json:"usage"`
	} `json:"message"`
	ContentBlock *block `json:"content_block"`
	Delta        *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *usage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// NewStream returns a Stream that gives up (every later Write and Result
// fail) once more than limit bytes were written; limit <= 0 means none.
func NewStream(limit int64) *Stream {
	s := &Stream{blocks: map[int]*streamBlock{}}
	s.dec = sse.NewDecoder(limit, s.event)
	return s
}

// Write feeds the next piece of the event stream.
func (s *Stream) Write(p []byte) (int, error) { return s.dec.Write(p) }

// event folds in one event: message_start (usage), content_block_start,
// content_block_delta (text_delta, input_json_delta, thinking_delta,
// signature_delta; citations_delta carries nothing chat keeps),
// content_block_stop, message_delta (usage, stop_reason), message_stop, ping. An error
// event marks the reply failed (see Result). It fails with
// memory.ErrInvalid once the stream starts more than maxStreamBlocks
// blocks.
func (s *Stream) event(ev sse.Event) error {
	var e streamEvent
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return fmt.Errorf("%w: stream event %q: %v", memory.ErrInvalid, ev.Type, err)
	}
	switch e.Type {
	case "message_start":
		s.started = true
		if e.Message != nil {
			s.usage.merge(e.Message.Usage)
		}
	case "content_block_start":
		if e.ContentBlock == nil {
			return fmt.Errorf("%w: content_block_start without content_block", memory.ErrInvalid)
		}
		if t := e.ContentBlock.Type; t == "thinking" || t == "redacted_thinking" {
			s.lossy = s.lossy || !memory.Lossless(ev.Data)
		}
		if s.blocks[e.Index] == nil && len(s.blocks) == maxStreamBlocks {
			return fmt.Errorf("%w: stream has more than %d content blocks", memory.ErrInvalid, maxStreamBlocks)
		}
		b := &streamBlock{block: *e.ContentBlock}
		b.text.WriteString(b.Text)
		b.thinking.WriteString(b.Thinking)
		b.signature.WriteString(b.Signature)
		s.blocks[e.Index] = b
	case "content_block_delta":
		b := s.blocks[e.Index]
		if b == nil || e.Delta == nil {
			return fmt.Errorf("%w: content_block_delta for unknown block %d", memory.ErrInvalid, e.Index)
		}
		switch e.Delta.Type {
		case "text_delta":
			b.text.WriteString(e.Delta.Text)
		case "thinking_delta":
			b.thinking.WriteString(e.Delta.Thinking)
			s.lossy = s.lossy || !memory.Lossless(ev.Data)
		case "signature_delta":
			b.signature.WriteString(e.Delta.Signature)
			s.lossy = s.lossy || !memory.Lossless(ev.Data)
		case "input_json_delta":
			b.inputJSON.WriteString(e.Delta.PartialJSON)
			b.sawInput = true
		}
	case "message_delta":
		s.usage.merge(e.Usage)
		s.stopped = s.stopped || e.Delta != nil && e.Delta.StopReason != ""
	case "message_stop":
		s.stopped = true
	case "error":
		if s.failed == "" {
			s.failed = "upstream error event"
			if e.Error != nil && e.Error.Type+e.Error.Message != "" {
				s.failed = strings.TrimPrefix(e.Error.Type+": "+e.Error.Message, ": ")
			}
		}
	}
	return nil
}

// HangUp notes that the client hung up after the events written so far,
// and reports whether they hold a whole answer: message_delta gave its
// stop_reason, and only message_stop may follow.
func (s *Stream) HangUp() bool {
	ok := s.dec.Err() == nil
	s.wholeAtHangUp = ok && (s.failed != "" || s.started && s.stopped)
	return ok && s.started && s.stopped
}

// HungUpResult returns the reply as Result did when HangUp was called:
// the reply when it was whole then, else memory.ErrInvalid.
func (s *Stream) HungUpResult() (memory.Message, *memory.Usage, error) {
	if !s.wholeAtHangUp {
		return memory.Message{}, nil, fmt.Errorf("%w: stream not whole when its client hung up", memory.ErrInvalid)
	}
	return s.Result()
}

// Result returns the reply reassembled — equal to what ReplyFromJSON reads
// from the same answer given whole — and the usage. A stream the upstream
// broke off with an error event returns what was streamed before it, marked
// with memory.FailedField (as chat's StreamReply does). The reply is whole
// once message_delta gave its stop_reason: a stream read up to there (a
// client that stopped reading at it) returns it as at message_stop. It
// fails when the stream ended before both without an error event, or
// exceeded the limit.
func (s *Stream) Result() (memory.Message, *memory.Usage, error) {
	if err := s.dec.Err(); err != nil {
		return memory.Message{}, nil, fmt.Errorf("anthropic stream: %w", err)
	}
	if s.failed == "" && (!s.started || !s.stopped) {
		return memory.Message{}, nil, fmt.Errorf("%w: stream ended before its stop_reason", memory.ErrInvalid)
	}
	idx := make([]int, 0, len(s.blocks))
	for i := range s.blocks {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	blocks := make([]block, 0, len(idx))
	for _, i := range idx {
		b := s.blocks[i]
		out := b.block
		out.Text = b.text.String()
		out.Thinking = b.thinking.String()
		out.Signature = b.signature.String()
		if b.sawInput {
			out.Input = json.RawMessage(b.inputJSON.String())
		}
		blocks = append(blocks, out)
	}
	msg, err := chat.Encode(assistantMessage(blocks, !s.lossy))
	if err == nil && s.failed != "" {
		msg, err = memory.MarkFailed(msg, s.failed)
	}
	if err != nil {
		return memory.Message{}, nil, err
	}
	return msg, s.usage.memory(), nil
}
