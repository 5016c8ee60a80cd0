package proxy

import (
	"bytes"
	"net/http"
	"time"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/capture"
	"github.com/memgate/memgate/internal/dialect"
	"github.com/memgate/memgate/internal/memory"
)

// bodyReadTimeout bounds reading a request body (the server has no read
// timeout, which would also cut streams).
const bodyReadTimeout = 60 * time.Second

// chatAPI is POST /v1/chat/completions: to the OpenAI upstream, replies read
// by internal/capture, errors in OpenAI's shape.
func chatAPI(up *target) *api {
	return &api{
		name:       dialect.Chat,
		up:         up,
		reply:      capture.ReplyFromJSON,
		stream:     func() replyStream { return &chatStream{reply: capture.NewStreamReply()} },
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

// chatStream splits a chat completion event stream into lines and passes
// the payload of each data line (except [DONE]) to a capture.StreamReply.
type chatStream struct {
	reply *capture.StreamReply
	line  []byte
}

var dataPrefix = []byte("data:")

// Write feeds the next piece of the stream; it fails with the first chunk
// the StreamReply rejects.
func (s *chatStream) Write(chunk []byte) (int, error) {
	n := len(chunk)
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			s.line = append(s.line, chunk...)
			break
		}
		s.line = append(s.line, chunk[:i]...)
		chunk = chunk[i+1:]
		line := s.line
		s.line = s.line[:0]
		if bytes.HasPrefix(line, dataPrefix) {
			if p := bytes.TrimSpace(line[len(dataPrefix):]); len(p) > 0 && string(p) != "[DONE]" {
				if err := s.reply.Add(p); err != nil {
					return 0, err
				}
			}
		}
	}
	return n, nil
}

// Result returns the reassembled reply.
func (s *chatStream) Result() (memory.Message, *memory.Usage, error) { return s.reply.Result() }
