package responses

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/memgate/memgate/internal/dialect/chat"
	"github.com/memgate/memgate/internal/memory"
)

// response is the part of a response object memgate reads.
type response struct {
	ID     string          `json:"id"`
	Object string          `json:"object"`
	Status string          `json:"status"`
	Output []item          `json:"output"`
	Usage  *usage          `json:"usage"`
	Error  json.RawMessage `json:"error"`
}

// usage is the Responses API's usage object.
type usage struct {
	InputTokens        memory.TokenCount `json:"input_tokens"`
	OutputTokens       memory.TokenCount `json:"output_tokens"`
	InputTokensDetails struct {
		CachedTokens memory.TokenCount `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// ErrNotDone is the error of a reply whose response is not done: a
// background response (background: true) answers at once queued or
// in_progress, with no output yet; its answer comes later, to a GET of
// the response or in its stream.
var ErrNotDone = errors.New("the response is not done")

// ErrEnded is the error of a reply whose response ended without an
// answer: it failed, or was cancelled (a background response). It wraps
// memory.ErrInvalid.
var ErrEnded = fmt.Errorf("%w: the response ended without an answer", memory.ErrInvalid)

// Done reports whether a response's status is terminal: any but queued
// and in_progress (a reply that gives none is done).
func Done(status string) bool { return status != "queued" && status != "in_progress" }

// reply converts a response's output items to the chat assistant message
// memgate stores: output text as content, function calls as tool_calls,
// reasoning summaries as reasoning_content. A response not done fails
// with ErrNotDone, a failed or cancelled one with ErrEnded.
func (r response) reply() (memory.Message, *memory.Usage, error) {
	if !Done(r.Status) {
		return memory.Message{}, nil, fmt.Errorf("%w: it is %s", ErrNotDone, r.Status)
	}
	if r.Status == "failed" || r.Status == "cancelled" || len(r.Error) > 0 && string(r.Error) != "null" {
		return memory.Message{}, nil, fmt.Errorf("%w (%s)", ErrEnded, cmp.Or(r.Status, "error"))
	}
	return r.message()
}

// message is reply's conversion, whatever the response's status.
func (r response) message() (memory.Message, *memory.Usage, error) {
	a := &assistant{}
	for _, it := range r.Output {
		a.add(it)
	}
	msg, err := chat.Encode(a.message())
	if err != nil {
		return memory.Message{}, nil, err
	}
	var u *memory.Usage
	if r.Usage != nil {
		u = chat.Usage(int(r.Usage.InputTokens), int(r.Usage.OutputTokens))
		u.CachedTokens = int(r.Usage.InputTokensDetails.CachedTokens)
	}
	return msg, u, nil
}

// ReplyFromJSON reads a non-streamed Responses API response and returns its
// output as one chat assistant message and the usage (nil when absent). It
// fails with memory.ErrInvalid when the body is not a response or the
// response failed or was cancelled (ErrEnded), with ErrNotDone when the response is
// not done yet (a background response queued or in progress).
func ReplyFromJSON(b []byte) (memory.Message, *memory.Usage, error) {
	var r response
	if err := json.Unmarshal(b, &r); err != nil {
		return memory.Message{}, nil, fmt.Errorf("%w: response body: %v", memory.ErrInvalid, err)
	}
	if r.Object != "response" {
		return memory.Message{}, nil, fmt.Errorf("%w: body is a %q, not a response", memory.ErrInvalid, r.Object)
	}
	return r.reply()
}
