package proxy

import (
	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/dialect"
	"github.com/memgate/memgate/internal/dialect/responses"
)

// responsesAPI is POST /v1/responses, the OpenAI Responses API: to the
// OpenAI upstream, replies read by internal/dialect/responses, errors in
// OpenAI's shape.
func responsesAPI(up *target) *api {
	return &api{
		name:           dialect.Responses,
		up:             up,
		reply:          responses.ReplyFromJSON,
		stream:         func() replyStream { return responses.NewStream(0) },
		toollessStream: func() replyStream { return responses.NewToollessStream(0) },
		streamEnd: func(line []byte) bool {
			return sseField(line, "event", "response.completed") || sseField(line, "event", "response.incomplete")
		},
		writeError: apierr.Write,
	}
}
