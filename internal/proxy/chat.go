package proxy

import (
	"bytes"
	"net/http"
	"time"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/dialect"
	"github.com/memgate/memgate/internal/dialect/sse"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// bodyReadTimeout bounds reading a request body (the server has no read
// timeout, which would also cut streams).
const bodyReadTimeout = 60 * time.Second

// chatAPI is POST /v1/chat/completions: to the OpenAI upstream, replies read
// by internal/engine/record, errors in OpenAI's shape.
func chatAPI(up *target) *api {
	return &api{
		name:       dialect.Chat,
		up:         up,
		reply:      record.ReplyFromJSON,
		stream:     func() replyStream { return &chatStream{reply: record.NewStreamReply()} },
		streamEnd:  func(line []byte) bool { return sseField(line, "data", "[DONE]") },
		writeError: apierr.Write,
	}
}

// readBody reads a request body within limit and bodyReadTimeout.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apierr.Error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	defer rc.SetReadDeadline(time.Time{})
	return apierr.ReadBody(w, r, limit)
}

// chatStream decodes a chat completion event stream (sse.Decoder:
// multi-line data fields joined, CRLF and CR line ends, comments skipped)
// and passes each event but the [DONE] sentinel to a record.StreamReply.
type chatStream struct {
	reply *record.StreamReply
	dec   *sse.Decoder
	err   error
}

// Write feeds the next piece of the stream; it fails with the first event
// the StreamReply rejects.
func (s *chatStream) Write(chunk []byte) (int, error) {
	if s.dec == nil {
		s.dec = sse.NewDecoder(0, func(ev sse.Event) error {
			if p := bytes.TrimSpace(ev.Data); len(p) > 0 && string(p) != "[DONE]" {
				return s.reply.AddEvent(ev.Type, p)
			}
			return nil
		})
	}
	if s.err != nil {
		return 0, s.err
	}
	if _, s.err = s.dec.Write(chunk); s.err != nil {
		return 0, s.err
	}
	return len(chunk), nil
}

// Result returns the reassembled reply. A last event the upstream did not
// end with a blank line still counts.
func (s *chatStream) Result() (memory.Message, *memory.Usage, error) {
	if s.dec != nil && s.err == nil {
		if _, err := s.dec.Write([]byte("\n\n")); err != nil {
			return memory.Message{}, nil, err
		}
	}
	return s.reply.Result()
}
