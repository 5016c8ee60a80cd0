package proxy

import (
	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/dialect"
	"github.com/memgate/memgate/internal/dialect/chat"
)

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
