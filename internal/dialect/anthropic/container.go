package anthropic

import (
	"encoding/json"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/memory"
)

// A Messages request may name a container by id (container: "…", or
// {"id": "…", "skills": …}): the provider then runs the code execution
// tool in the container an earlier reply named (its container.id), with
// the files that run uploaded and wrote. With one provider key for every
// tenant the provider cannot tell whose it is; memgate binds each
// container a reply names to its caller (ReplyStates, StateStream) and
// checks the one a request names (States).

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
// asks to run in, by its id ("" when the member holds none), and the
// files its messages name (readFiles).
func (r *Request) States() []memory.ProviderState {
	var out []memory.ProviderState
	if r.namesContainer {
		out = append(out, memory.ProviderState{Kind: memory.StateContainer, ID: r.container})
	}
	for _, id := range r.files {
		out = append(out, memory.ProviderState{Kind: memory.StateFile, ID: id})
	}
	return out
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

// ReadStates reads what a Messages body names of provider state, as
// ParseRequest's States and Repeated do, without reading the rest of
// the body: a token count's, whose other members the provider checks.
// A body that is not a JSON object names none (the provider refuses it).
func ReadStates(b []byte) (states []memory.ProviderState, param, key string) {
	obj, err := body.Parse(b)
	if err != nil {
		return nil, "", ""
	}
	r := &Request{obj: obj}
	r.readContainer()
	r.files = readFiles(b)
	param, key = r.Repeated()
	return r.States(), param, key
}
