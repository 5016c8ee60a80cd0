package proxy

import (
	"net/http"
	"time"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/dialect"
	"github.com/memgate/memgate/internal/dialect/chat"
)

// bodyReadTimeout bounds reading a request body (the server has no read
// timeout, which would also cut streams).
const bodyReadTimeout = 60 * time.Second

// chatAPI is POST /v1/chat/completions: to the OpenAI upstream, replies read
// by internal/dialect/chat, errors in OpenAI's shape.
func chatAPI(up *target) *api {
	return &api{
		name:       dialect.Chat,
		up:         up,
		reply:      chat.ReplyFromJSON,
		stream:     func() replyStream { return chat.NewStream(0) },
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
