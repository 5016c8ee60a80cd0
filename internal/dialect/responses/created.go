package responses

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/memgate/memgate/internal/dialect/sse"
)

// Created is what a reply created at the provider: its own id (a
// response's, or a conversation's of the Conversations API) and the ids
// of a response's output items, which later requests may name.
type Created struct {
	ID    string
	Items []string
}

// createdJSON is the part of a reply, or of a stream event's response,
// naming what it created: a response's output items, or the items of a
// list (a conversation's items, a response's input items).
type createdJSON struct {
	ID     string   `json:"id"`
	Output itemList `json:"output"`
	Data   itemList `json:"data"`
}

// itemID is the part of an item naming it.
type itemID struct {
	ID string `json:"id"`
}

// itemList is a member listing items. A member of that name that is not
// a list names none: one item retrieved on its own (GET
// /v1/conversations/{id}/items/{item}) has an output of its own, a
// string (function_call_output, mcp_call) or an object
// (computer_call_output), and is read for its id alone.
type itemList []itemID

// UnmarshalJSON reads a list of items, or none from another value.
func (l *itemList) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '[' {
		*l = nil
		return nil
	}
	return json.Unmarshal(b, (*[]itemID)(l))
}

func (c createdJSON) items() []string {
	var ids []string
	for _, it := range append(c.Output, c.Data...) {
		if it.ID != "" {
			ids = append(ids, it.ID)
		}
	}
	return ids
}

// CreatedFromJSON reads what a whole reply created: its top-level id and
// its output items' ids. It fails when the reply names no id.
func CreatedFromJSON(b []byte) (Created, error) {
	c, err := ItemsFromJSON(b)
	if err == nil && c.ID == "" {
		err = errors.New("the reply names no id")
	}
	return c, err
}

// ItemsFromJSON reads the items a whole reply names, which need not name
// an id of its own: a response's output items (GET /v1/responses/{id} of
// a background response, its cancel) or a list's items (the items
// POST /v1/conversations/{id}/items added, a conversation's or a
// response's input items listed), with its top-level id when it gives one.
func ItemsFromJSON(b []byte) (Created, error) {
	var c createdJSON
	if err := json.Unmarshal(b, &c); err != nil {
		return Created{}, err
	}
	return Created{ID: c.ID, Items: c.items()}, nil
}

// terminalEvents end a stream with the response's output.
var terminalEvents = map[string]bool{"response.completed": true, "response.incomplete": true, "response.failed": true}

// CreatedStream reads what a streamed reply creates from the event stream
// as it is relayed, in whatever pieces, and hands it on as soon as an
// event completes: the response's id from the first event naming it
// (Created.ID, no items), its output items' ids from the terminal event
// (Created.Items, no ID; final). Only the events about the response as a
// whole are decoded. It is used by one goroutine.
type CreatedStream struct {
	dec   *sse.Decoder
	fn    func(c Created, final bool)
	named bool // the response's id was handed on
}

// NewCreatedStream returns a CreatedStream calling fn, which fails (every
// later Write fails) once more than limit bytes were written.
func NewCreatedStream(limit int64, fn func(c Created, final bool)) *CreatedStream {
	s := &CreatedStream{fn: fn}
	s.dec = sse.NewDecoder(limit, s.event)
	return s
}

// Write feeds the next piece of the event stream.
func (s *CreatedStream) Write(p []byte) (int, error) { return s.dec.Write(p) }

func (s *CreatedStream) event(ev sse.Event) error {
	if ev.Type != "message" && !strings.HasPrefix(ev.Type, "response.") || strings.HasSuffix(ev.Type, ".delta") {
		return nil
	}
	var e struct {
		Type     string       `json:"type"`
		Response *createdJSON `json:"response"`
	}
	if json.Unmarshal(ev.Data, &e) != nil || e.Response == nil || e.Response.ID == "" {
		return nil
	}
	if !s.named {
		s.named = true
		s.fn(Created{ID: e.Response.ID}, false)
	}
	if terminalEvents[e.Type] {
		s.fn(Created{Items: e.Response.items()}, true)
	}
	return nil
}
