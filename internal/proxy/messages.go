package proxy

import (
	"net/http"
	"strconv"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/dialect"
	"github.com/memgate/memgate/internal/dialect/anthropic"
)

// messagesAPI is POST /v1/messages, the Anthropic Messages API: to the
// Anthropic upstream (x-api-key, anthropic-version and anthropic-beta pass
// through), replies read by internal/dialect/anthropic, and every error —
// memgate's own included — in Anthropic's shape.
func messagesAPI(up *target) *api {
	return &api{
		name:       dialect.Messages,
		up:         up,
		reply:      anthropic.ReplyFromJSON,
		stream:     func() replyStream { return anthropic.NewStream(0) },
		streamEnd:  func(line []byte) bool { return sseField(line, "event", "message_stop") },
		writeError: writeAnthropicError,
	}
}

// writeAnthropicError writes e as {"type":"error","error":{"type","message"}}
// (a 413 as Anthropic's request_too_large), with request-id, where the
// Anthropic SDKs read a request's id (error.requestID): the gateway's
// X-Request-Id, unless w already holds one.
func writeAnthropicError(w http.ResponseWriter, e *apierr.Error) {
	typ := e.Type
	if e.Status == http.StatusRequestEntityTooLarge {
		typ = "request_too_large"
	}
	b := append(anthropic.ErrorBody(e.Status, typ, e.Message, e.Param, e.Code), '\n')
	h := w.Header()
	setRequestID(h, h.Get("X-Request-Id"))
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.Status)
	w.Write(b)
}

// setRequestID sets request-id, the Anthropic API's request id header, to
// id in h unless h has one (a provider's own stays) or id is "".
func setRequestID(h http.Header, id string) {
	if _, ok := h["Request-Id"]; !ok && id != "" {
		h["Request-Id"] = []string{id}
	}
}
