package anthropic

import (
	"encoding/json"
	"fmt"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/dialect/sse"
	"github.com/memgate/memgate/internal/memory"
)

// A Messages request may name a container by id (container: "…", or
// {"id": "…", "skills": …}): the provider then runs the code execution
// tool in the container an earlier reply named (its container.id), with
// the files that run uploaded and wrote. With one provider key for every
// tenant the provider cannot tell whose it is; memgate binds each
// container a reply names to its caller (ContainerFromJSON,
// ContainerStream) and checks the one a request names (States).

// readContainer reads the container member: its id, as the provider
// reads it (by exact names; an object giving a member twice is recorded
// in repeated, since which value counts depends on the parser). A
// container without an id (an object of skills alone: a new container)
// names none.
func (r *Request) readContainer() {
	c := r.obj.Get("container")
	if !r.obj.Has("container") || string(c) == "null" {
		return
	}
	var id string
	if json.Unmarshal(c, &id) == nil {
		r.container, r.namesContainer = id, true
		return
	}
	obj, err := body.Parse(c)
	if err != nil {
		return // the provider's to refuse
	}
	r.containerRepeated = obj.Repeated()
	if obj.Has("id") && string(obj.Get("id")) != "null" {
		r.namesContainer = true
		_ = json.Unmarshal(obj.Get("id"), &r.container) // "" when not a string: an id no owner has
	}
}

// States are the provider states the request names: the container it
// asks to run in, by its id ("" when the member holds none).
func (r *Request) States() []memory.ProviderState {
	if !r.namesContainer {
		return nil
	}
	return []memory.ProviderState{{Kind: memory.StateContainer, ID: r.container}}
}

// Repeated is the first member the body or its container object gives
// twice when the request names a container (param "" for the body,
// "container" for the object), key "" when none: the container memgate
// reads need not be the one the provider reads.
func (r *Request) Repeated() (param, key string) {
	switch {
	case !r.obj.Has("container"):
		return "", ""
	case r.obj.Repeated() != "":
		return "", r.obj.Repeated()
	case r.containerRepeated != "":
		return "container", r.containerRepeated
	}
	return "", ""
}

// containerJSON is the part of a reply, or of a stream event's message
// or delta, naming the container it ran in.
type containerJSON struct {
	Container *struct {
		ID string `json:"id"`
	} `json:"container"`
}

func (c containerJSON) id() string {
	if c.Container == nil {
		return ""
	}
	return c.Container.ID
}

// ContainerFromJSON returns the id of the container a whole Messages
// reply ran in ("" when none).
func ContainerFromJSON(b []byte) (string, error) {
	var c containerJSON
	if err := json.Unmarshal(b, &c); err != nil {
		return "", err
	}
	return c.id(), nil
}

// ContainerStream reads the container a streamed Messages reply of any
// length ran in from its events as they are relayed, in whatever
// pieces: message_start's message and message_delta's delta may name
// it; fn is called with each id named, as soon as its event completes,
// and with final once message_stop was read. An event that may name it
// larger than limit bytes stops it (every later Write fails); the other
// events are not decoded. It is used by one goroutine.
type ContainerStream struct {
	dec   *sse.Decoder
	limit int64
	fn    func(id string, final bool)
}

// NewContainerStream returns a ContainerStream calling fn, holding about
// twice limit bytes.
func NewContainerStream(limit int64, fn func(id string, final bool)) *ContainerStream {
	s := &ContainerStream{limit: limit, fn: fn}
	s.dec = sse.NewEventDecoder(limit, s.event)
	return s
}

// Write reads p, a piece of the stream.
func (s *ContainerStream) Write(p []byte) (int, error) { return s.dec.Write(p) }

func (s *ContainerStream) event(ev sse.Event) error {
	switch ev.Type {
	case "message_stop":
		s.fn("", true)
		return nil
	case "message_start", "message_delta", "message":
	default:
		return nil
	}
	if ev.TooLarge {
		return fmt.Errorf("a %.64s event is larger than %d bytes", ev.Type, s.limit)
	}
	var e struct {
		Type    string        `json:"type"`
		Message containerJSON `json:"message"`
		Delta   containerJSON `json:"delta"`
	}
	if json.Unmarshal(ev.Data, &e) != nil {
		return nil
	}
	switch e.Type {
	case "message_start":
		if id := e.Message.id(); id != "" {
			s.fn(id, false)
		}
	case "message_delta":
		if id := e.Delta.id(); id != "" {
			s.fn(id, false)
		}
	case "message_stop":
		s.fn("", true)
	}
	return nil
}
