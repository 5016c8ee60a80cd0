package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/dialect/sse"
)

// Created is what a reply created at the provider: its own id (a
// response's, or a conversation's of the Conversations API), the ids
// of a response's output items, which later requests may name, and the
// containers its items ran in (a code interpreter call's container_id),
// which a later request's tool may name to run in again.
type Created struct {
	ID         string
	Items      []string
	Containers []string
}

// names reports whether c names anything.
func (c Created) names() bool { return c.ID != "" || len(c.Items) > 0 || len(c.Containers) > 0 }

// add adds the ids an item gives: its own and its container's.
func (c *Created) add(it itemID) {
	if it.ID != "" {
		c.Items = append(c.Items, it.ID)
	}
	if it.ContainerID != "" {
		c.Containers = append(c.Containers, it.ContainerID)
	}
}

// createdJSON is the part of a reply, or of a stream event's response,
// naming what it created: a response's output items, or the items of a
// list (a conversation's items, a response's input items).
type createdJSON struct {
	ID     string   `json:"id"`
	Output itemList `json:"output"`
	Data   itemList `json:"data"`
}

// itemID is the part of an item naming it and the container it ran in.
type itemID struct {
	ID          string `json:"id"`
	ContainerID string `json:"container_id"`
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

// created is what c names: its id, and its items' ids and containers.
func (c createdJSON) created() Created {
	out := Created{ID: c.ID}
	for _, it := range append(c.Output, c.Data...) {
		out.add(it)
	}
	return out
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
	return c.created(), nil
}

// terminalEvents end a stream with the response's output.
var terminalEvents = map[string]bool{"response.completed": true, "response.incomplete": true, "response.failed": true}

// CreatedStream reads what a streamed reply of any length creates from
// the event stream as it is relayed, in whatever pieces, and hands it on
// as soon as an event completes: the response's id from the first event
// naming it (Created.ID, no items), an output item's id from the first
// output_item event naming it (Created.Items, no ID), and the ids of the
// terminal event's output not handed on yet (Created.Items, no ID;
// final). It decodes only the events that may name them (namesStates),
// and holds about twice its limit: an event to decode larger than that
// stops it (every later Write fails), the ids it names never handed on;
// a larger event of another kind (a partial image), or a larger
// output_item.done (a finished image: its item was announced in its
// output_item.added), is skipped. It is used by one goroutine.
type CreatedStream struct {
	dec   *sse.Decoder
	limit int64
	fn    func(c Created, final bool)
	named bool // the response's id was handed on
	// seen are the items' ids handed on, not handed on again, up to
	// maxSeenBytes of them (past that, an id may be handed on twice).
	seen      map[string]bool
	seenBytes int
}

// maxSeenBytes bounds the item ids a CreatedStream remembers.
const maxSeenBytes = 64 << 10

// NewCreatedStream returns a CreatedStream calling fn, which fails (every
// later Write fails) once an event that may name what the reply created
// is larger than limit bytes.
func NewCreatedStream(limit int64, fn func(c Created, final bool)) *CreatedStream {
	s := &CreatedStream{limit: limit, fn: fn, seen: map[string]bool{}}
	s.dec = sse.NewEventDecoder(limit, s.event)
	return s
}

// Write feeds the next piece of the event stream.
func (s *CreatedStream) Write(p []byte) (int, error) { return s.dec.Write(p) }

// namesStates reports whether an event of type typ may name what the
// reply creates: an event of the response as a whole (response.created,
// response.completed, ...), of an output item (output_item.added,
// output_item.done), or an untyped one, told by its data alone; not an
// event of an item's content (a delta, a partial image, ...), which
// names an item announced before.
func namesStates(typ string) bool {
	switch typ {
	case "message", "response.output_item.added", "response.output_item.done":
		return true
	}
	return strings.HasPrefix(typ, "response.") && strings.Count(typ, ".") == 1
}

func (s *CreatedStream) event(ev sse.Event) error {
	if !namesStates(ev.Type) {
		return nil
	}
	switch {
	case ev.TooLarge && ev.Type == "response.output_item.done":
		// A finished item (a generated image in it): its id came in
		// the output_item.added announcing it, and an id it alone
		// names stays unbound, which refuses it; the items after it
		// are still read.
		return nil
	case ev.TooLarge:
		return fmt.Errorf("a %.64s event is larger than %d bytes", ev.Type, s.limit)
	}
	var e struct {
		Type     string       `json:"type"`
		Response *createdJSON `json:"response"`
		Item     *itemID      `json:"item"`
	}
	if json.Unmarshal(ev.Data, &e) != nil || ev.Type == "message" && !namesStates(e.Type) {
		return nil
	}
	if e.Item != nil && (e.Type == "response.output_item.added" || e.Type == "response.output_item.done") {
		if c := s.unseen(Created{Items: []string{e.Item.ID}, Containers: []string{e.Item.ContainerID}}); c.names() {
			s.fn(c, false)
		}
		return nil
	}
	if e.Response == nil || e.Response.ID == "" {
		return nil
	}
	if !s.named {
		s.named = true
		s.fn(Created{ID: e.Response.ID}, false)
	}
	if terminalEvents[e.Type] {
		c := e.Response.created()
		c.ID = ""
		s.fn(s.unseen(c), true)
	}
	return nil
}

// unseen returns the items and containers of c not handed on yet,
// remembering them.
func (s *CreatedStream) unseen(c Created) Created {
	return Created{Items: s.unseenOf("i", c.Items), Containers: s.unseenOf("c", c.Containers)}
}

// unseenOf returns those of ids (of the kind tag) not handed on yet,
// remembering them.
func (s *CreatedStream) unseenOf(tag string, ids []string) []string {
	var out []string
	for _, id := range ids {
		k := tag + id
		if id == "" || s.seen[k] {
			continue
		}
		out = append(out, id)
		if s.seenBytes+len(k) <= maxSeenBytes {
			s.seen[k] = true
			s.seenBytes += len(k)
		}
	}
	return out
}

// CreatedReader relays a whole JSON reply too large to hold, byte for
// byte, and reads what it names as it goes (as ItemsFromJSON does of a
// reply held whole: its top-level id, its output or list items' ids),
// handing each on before any byte naming it is read from the
// CreatedReader: a body.Reader over the reply's top-level id and its
// lists of items (output, data), one member or one item at a time. It
// is used by one goroutine.
type CreatedReader struct {
	*body.Reader
}

// NewCreatedReader returns a CreatedReader relaying src, which calls fn
// with the ids it finds, before the bytes naming them are read from it
// (final once the reply was read whole, with what is left, possibly
// nothing), or fail once it stops reading: a value over limit bytes, a
// reply over total bytes or that is not a JSON object, an id that is
// not a string.
func NewCreatedReader(src io.Reader, limit, total int64, fn func(c Created, final bool), fail func(error)) *CreatedReader {
	return &CreatedReader{body.NewReader(src, limit, total, &createdVisitor{fn: fn}, fail)}
}

// createdVisitor reads a reply's top-level id and its lists' items
// (body.Visitor), as createdJSON does.
type createdVisitor struct {
	fn    func(c Created, final bool)
	found Created // what was read and not yet handed on
}

func (v *createdVisitor) Member(key string, dec *json.Decoder) (bool, error) {
	switch {
	case strings.EqualFold(key, "id"): // encoding/json's match, as createdJSON's
		var id string
		if err := dec.Decode(&id); err != nil {
			return false, err
		}
		v.found.ID = id
		return false, nil
	case strings.EqualFold(key, "output"), strings.EqualFold(key, "data"):
		return true, nil
	}
	return false, body.Skip(dec)
}

func (v *createdVisitor) Element(dec *json.Decoder) error {
	var it itemID
	if err := dec.Decode(&it); err != nil {
		return err
	}
	v.found.add(it)
	return nil
}

func (v *createdVisitor) Found() bool { return v.found.names() }

func (v *createdVisitor) Flush(final bool) {
	v.fn(v.found, final)
	v.found = Created{}
}
