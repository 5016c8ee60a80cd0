package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

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
// CreatedReader. It decodes with encoding/json's Decoder, one top-level
// member or one item at a time, and holds at most about three times its
// limit: the decoder's unread input and the bytes it has read and not
// yet handed out, each bounded by one value of at most limit bytes (a
// member other than the lists, or one item) and what was read with it.
// It reads no more than total bytes of the reply (decoding costs some
// 20 ns a byte). A value larger than limit, a reply larger than total or
// that is not a JSON object stops the reading: what it names from there
// on is never handed on (fail), and the rest is relayed as it comes. It
// is used by one goroutine.
type CreatedReader struct {
	src          io.Reader
	dec          *json.Decoder
	limit, total int64
	fn           func(c Created, final bool)
	fail         func(error)

	pending []byte  // bytes read from src and not yet handed out
	base    int64   // the reply's offset of pending[0]
	read    int64   // bytes read from src
	safe    int64   // the offset up to which bytes may be handed out
	found   Created // what was read and not yet handed on
	depth   int     // 1 in the top-level object, 2 in a list of items
	over    bool    // the reading ended (read whole, or stopped)
	srcErr  error   // src's error, once pending is handed out
}

// createdFlushBytes is how many bytes read past what was last handed on
// a CreatedReader holds before handing on the ids it found.
const createdFlushBytes = 1 << 20

// NewCreatedReader returns a CreatedReader relaying src, which calls fn
// with the ids it finds, before the bytes naming them are read from it
// (final once the reply was read whole, with what is left, possibly
// nothing), or fail once it stops reading: a value over limit bytes, a
// reply over total bytes or that is not a JSON object, an id that is
// not a string.
func NewCreatedReader(src io.Reader, limit, total int64, fn func(c Created, final bool), fail func(error)) *CreatedReader {
	r := &CreatedReader{src: src, limit: limit, total: total, fn: fn, fail: fail}
	r.dec = json.NewDecoder(createdSource{r})
	return r
}

// createdSource is what a CreatedReader's decoder reads: src, each byte
// kept in pending until it is handed out.
type createdSource struct{ r *CreatedReader }

func (s createdSource) Read(p []byte) (int, error) {
	r := s.r
	// The decoder holds what it read past its offset (one value, and
	// what was read with it): no more than limit bytes, and it reads
	// no more than that at once.
	room := r.limit - (r.read - r.dec.InputOffset())
	if room < 0 {
		return 0, fmt.Errorf("a value of the reply is larger than %d bytes", r.limit)
	}
	if r.read >= r.total {
		return 0, fmt.Errorf("the reply is larger than %d bytes", r.total)
	}
	if int64(len(p)) > min(room+1, r.total-r.read) {
		p = p[:min(room+1, r.total-r.read)]
	}
	n, err := r.src.Read(p)
	r.pending = append(r.pending, p[:n]...)
	r.read += int64(n)
	if err != nil && err != io.EOF {
		r.srcErr = err
	}
	return n, err
}

// Read hands out the reply's next bytes, once the ids they name were
// handed on.
func (r *CreatedReader) Read(p []byte) (int, error) {
	for r.safe == r.base && !r.over {
		r.step()
	}
	if len(r.pending) > 0 {
		n := copy(p, r.pending[:min(int64(len(r.pending)), r.safe-r.base)])
		r.pending = r.pending[n:]
		r.base += int64(n)
		if len(r.pending) == 0 {
			r.pending = nil // the held bytes go with what was handed out
		}
		return n, nil
	}
	if r.srcErr != nil {
		return 0, r.srcErr
	}
	// Read whole or stopped: the rest goes as it comes.
	n, err := r.src.Read(p)
	r.base += int64(n)
	return n, err
}

// step decodes the next top-level member or item, then hands on what
// was found when the reading ended or createdFlushBytes were read past
// what was handed out, and lets out the bytes decoded so far when no id
// read from them waits.
func (r *CreatedReader) step() {
	if err := r.next(); err != nil {
		r.over = true
		if err == errReadWhole {
			r.fn(r.found, true)
		} else {
			if r.found.names() {
				r.fn(r.found, false) // read whole before what stopped the reading
			}
			r.fail(err)
		}
		r.found = Created{}
		r.safe = math.MaxInt64
		return
	}
	if !r.found.names() {
		r.safe = r.dec.InputOffset()
		return
	}
	if r.read-r.safe >= createdFlushBytes {
		r.fn(r.found, false)
		r.found = Created{}
		r.safe = r.dec.InputOffset()
	}
}

// errReadWhole ends a CreatedReader's reading of a reply read whole.
var errReadWhole = errors.New("read whole")

// next decodes the start of the reply, one top-level member or one item
// of a list; errReadWhole once the top-level object is closed.
func (r *CreatedReader) next() error {
	if r.depth == 0 { // the start: next is not called past the end
		tok, err := r.dec.Token()
		if err != nil {
			return err
		}
		if tok != json.Delim('{') {
			return errors.New("the reply is not a JSON object")
		}
		r.depth = 1
		return nil
	}
	if r.depth == 2 {
		if r.dec.More() {
			var it itemID
			if err := r.dec.Decode(&it); err != nil {
				return err
			}
			r.found.add(it)
			return nil
		}
		_, err := r.dec.Token() // ]
		r.depth = 1
		return err
	}
	if !r.dec.More() {
		if _, err := r.dec.Token(); err != nil { // }
			return err
		}
		return errReadWhole
	}
	tok, err := r.dec.Token()
	if err != nil {
		return err
	}
	key, _ := tok.(string)
	switch {
	case strings.EqualFold(key, "id"): // encoding/json's match, as createdJSON's
		var id string
		if err := r.dec.Decode(&id); err != nil {
			return err
		}
		r.found.ID = id
		return nil
	case strings.EqualFold(key, "output"), strings.EqualFold(key, "data"):
		return r.list()
	}
	var skip json.RawMessage
	return r.dec.Decode(&skip)
}

// list reads the start of a member that lists items: a list is read an
// item at a time (next), any other value skipped (itemList: it names
// none).
func (r *CreatedReader) list() error {
	tok, err := r.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('['):
		r.depth = 2
	case json.Delim('{'):
		for open := 1; open > 0; { // skip the object, token by token
			tok, err := r.dec.Token()
			if err != nil {
				return err
			}
			switch tok {
			case json.Delim('{'), json.Delim('['):
				open++
			case json.Delim('}'), json.Delim(']'):
				open--
			}
		}
	}
	return nil
}
