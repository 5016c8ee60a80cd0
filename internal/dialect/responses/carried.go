package responses

import (
	"encoding/json"
	"fmt"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/memory"
)

// idRequired are the input item types whose id the API requires
// (openai-python's ResponseInputItemParam: id Required): dropping it
// would turn the client's request into a 400, and the provider may read
// the item it stored under it, so such an id is checked as a state the
// request names (RequiredIDs). The ids of every other type are optional
// (message — an assistant's included, which the API accepts without one
// — function_call, function_call_output, computer_call_output, custom
// and shell tool calls and outputs, mcp_approval_response, …), and a
// type not listed here is taken for one of those.
var idRequired = map[string]bool{
	"file_search_call": true, "computer_call": true, "web_search_call": true,
	"image_generation_call": true, "code_interpreter_call": true,
	"local_shell_call": true, "local_shell_call_output": true,
	"mcp_list_tools": true, "mcp_approval_request": true, "mcp_call": true,
	"program": true, "program_output": true,
}

// carriesID reports whether an input item that is no reference
// (reference) and gives id and typ carries an id memgate may drop: a
// non-empty string id (exact name) of an item that is no reasoning item
// (its encrypted content is issued for its id) and not of a type whose
// id the API requires (idRequired).
func carriesID(id, typ string) bool {
	return id != "" && typ != "reasoning" && !idRequired[typ]
}

// RequiredID is an id an input item gives that memgate can neither leave
// unchecked nor drop: the id of an item whose type requires one
// (idRequired), or the approval_request_id of an mcp_approval_response,
// which names the approval request (an output item) it answers. Param
// names the member ("input[3].id").
type RequiredID struct {
	ID, Param string
}

// requiredIDs returns the ids the item of members obj (members) at param
// (input[i], items[i]), which gives typ, must have checked
// (RequiredID).
func requiredIDs(obj map[string]json.RawMessage, param, typ string) []RequiredID {
	var out []RequiredID
	if id := exactString(obj, "id"); id != "" && idRequired[typ] {
		out = append(out, RequiredID{ID: id, Param: param + ".id"})
	}
	if id := exactString(obj, "approval_request_id"); id != "" && typ == "mcp_approval_response" {
		out = append(out, RequiredID{ID: id, Param: param + ".approval_request_id"})
	}
	return out
}

// RequiredIDs are the ids the input's items give that must be the
// caller's as they are sent (RequiredID), in input order: the provider
// may read the item stored under such an id, and the API refuses the
// item without it.
func (r *Request) RequiredIDs() []RequiredID { return r.required }

// carried is an input item that gives an id beside its content.
type carried struct {
	index int // in items
	id    string
}

// CarriedIDs are the ids the input's items give beside their content (a
// message, a function call or its output, …; see carriesID), one per
// such item in input order. The provider reads such an item from its
// content, yet may also hold a stored item under its id: an id that is
// not the caller's can be dropped (DropIDs), the content still going
// upstream.
func (r *Request) CarriedIDs() []memory.ProviderState { return carriedIDs(r.carried) }

// carriedIDs are the ids of cs, as item states.
func carriedIDs(cs []carried) []memory.ProviderState {
	var out []memory.ProviderState
	for _, c := range cs {
		out = append(out, memory.ProviderState{Kind: memory.StateItem, ID: c.id})
	}
	return out
}

// DropIDs removes the id member of each item of CarriedIDs whose drop is
// true (drop holds one flag per id) and returns the body to send: when
// none is dropped, the body as the client sent it; otherwise the body
// with those items without their id — their other members, the other
// items and the body's other members kept byte for byte. Render renders
// from the items as changed; what memory reads of the input (Messages)
// is unchanged.
func (r *Request) DropIDs(drop []bool) ([]byte, error) {
	changed, err := dropIDs(r.items, r.carried, drop)
	if err != nil || !changed {
		return r.raw, err
	}
	r.input = body.Array(r.items)
	r.obj.Set("input", r.input)
	r.raw = r.obj.Bytes()
	return r.raw, nil
}

// dropIDs removes the id member of items[c.index] for each c of cs
// whose drop is true (one flag per c), each such item re-encoded from
// its members' bytes; it reports whether any was.
func dropIDs(items []json.RawMessage, cs []carried, drop []bool) (bool, error) {
	if len(drop) != len(cs) {
		return false, fmt.Errorf("drop ids: %d flags for %d ids", len(drop), len(cs))
	}
	changed := false
	for i, c := range cs {
		if !drop[i] {
			continue
		}
		obj, err := body.Parse(items[c.index])
		if err != nil {
			return false, fmt.Errorf("drop ids: item %d: %w", c.index, err)
		}
		obj.Delete("id")
		items[c.index] = obj.Bytes()
		changed = true
	}
	return changed, nil
}
