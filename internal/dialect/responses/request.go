// Package responses adapts the OpenAI Responses API (POST /v1/responses) to
// memgate's memory core: instructions and input items become chat messages
// for inject and capture, an assembled prompt becomes a Responses body again
// (memory in instructions, stored turns as input items), and replies — whole
// or streamed — become the chat assistant message capture stores.
// Everything memgate does not rewrite (store, tools, reasoning, …) is
// forwarded as the client sent it.
package responses

import (
	"bytes"
	"cmp"
	"encoding/json"
	"strconv"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/dialect/chat"
	"github.com/memgate/memgate/internal/memory"
)

// Request is a Responses API request body, read once.
type Request struct {
	// Model, Stream, MaxTokens (max_output_tokens), User,
	// SafetyIdentifier and PreviousResponseID are the body's members (""
	// or 0 when absent).
	Model              string
	Stream             bool
	MaxTokens          int
	User               string
	SafetyIdentifier   string
	PreviousResponseID string
	// InConversation is true when the body names a conversation of the
	// Conversations API (conversation: an id or {"id": …}), and
	// ConversationID is its id ("" when neither form holds a string).
	InConversation bool
	ConversationID string
	// NoStore is true when the body asks the provider to keep nothing
	// (store: false): no later request can name the response or its
	// items.
	NoStore bool
	// Background is true when the body asks for a background response
	// (background: true): the reply, whole, is the response queued, its
	// answer to be fetched later (GET /v1/responses/{id}).
	Background bool
	// NoTools is true when the body declares no tools: tools is not a
	// non-empty array and it names no stored prompt (prompt), which may
	// carry tools of its own (memory.Request.NoTools).
	NoTools bool
	// Conversation holds the conversation in chat format for the memory
	// core: instructions as a system message (origin -1), then the input
	// (see ParseRequest), each with the input item it starts at.
	chat.Conversation

	raw          []byte // the body to send as the client's (DropIDs)
	obj          *body.Object
	instructions json.RawMessage   // nil when absent
	input        json.RawMessage   // the input member as sent
	items        []json.RawMessage // the input items (one synthetic item for a string input)
	inputString  bool
	itemRefs     []string        // ids of the input items the provider reads by id (reference)
	containers   []string        // ids of the containers the tools name (readContainers)
	carried      []carried       // the input items that give an id beside their content (carriesID)
	required     []RequiredID    // the ids the input's items give that must be checked as sent (requiredIDs)
	repeated     *RepeatedMember // the first input item or conversation object that gives a member twice
	held         int             // the input items, from the first, the provider holds (see readInput)
	referenced   bool            // the input holds an item_reference
	system       map[string]bool // Messages that are the client's own system messages
}

// ParseRequest reads a Responses API request body. The input becomes chat
// messages: a string is one user message; message items keep their role
// (input_text as text, input_image as image_url, input_file as file); an
// assistant message item, the function_call items after it and reasoning
// items before it make one assistant message (output text as content,
// function calls as tool_calls, reasoning summaries as reasoning_content);
// a function_call_output is a tool message. Items chat cannot hold (item
// references, built-in tool calls) are left out of memory and still
// forwarded. It fails with a *body.FieldError (matching memory.ErrInvalid)
// when the body is not an object, model is not a non-empty string, input is
// neither a string nor an array of items, or a member has the wrong type.
func ParseRequest(b []byte) (*Request, error) { return parseRequest(b, true) }

// ParseStateBody reads the body of a request to a fixed sub-path of the
// Responses API (POST /v1/responses/input_tokens, /v1/responses/compact),
// which names stored states as a create body does (previous_response_id,
// conversation, input items by id: States, Repeated) but need give
// neither model nor input. It fails as ParseRequest does otherwise.
func ParseStateBody(b []byte) (*Request, error) { return parseRequest(b, false) }

// parseRequest reads a Responses body; create requires the members a
// create body must give (model, and input unless previous_response_id).
func parseRequest(b []byte, create bool) (*Request, error) {
	obj, err := body.Parse(b)
	if err != nil {
		return nil, body.Invalid("", "%v", err)
	}
	r := &Request{raw: b, obj: obj, system: map[string]bool{}}
	r.repeat("", obj.Repeated())
	for _, m := range []struct {
		key string
		v   any
		msg string
	}{
		{"model", &r.Model, "model must be a string"},
		{"stream", &r.Stream, "stream must be a boolean"},
		{"max_output_tokens", &r.MaxTokens, "max_output_tokens must be an integer"},
		{"user", &r.User, "user must be a string"},
		{"previous_response_id", &r.PreviousResponseID, "previous_response_id must be a string"},
	} {
		if obj.Has(m.key) {
			if err := json.Unmarshal(obj.Get(m.key), m.v); err != nil {
				return nil, body.Invalid(m.key, "%s", m.msg)
			}
		}
	}
	if obj.Has("store") {
		var store *bool // null: the default, stored
		if json.Unmarshal(obj.Get("store"), &store) == nil && store != nil {
			r.NoStore = !*store
		}
	}
	if obj.Has("background") {
		json.Unmarshal(obj.Get("background"), &r.Background) // the upstream's to check
	}
	if obj.Has("safety_identifier") {
		json.Unmarshal(obj.Get("safety_identifier"), &r.SafetyIdentifier) // the upstream's to check
	}
	if r.Model == "" && create {
		return nil, body.Invalid("model", "model must be a non-empty string")
	}
	if c := obj.Get("conversation"); obj.Has("conversation") && string(c) != "null" {
		r.InConversation = true
		var repeated string
		r.ConversationID, repeated = conversationID(c)
		r.repeat("conversation", repeated)
	}
	tools := body.NonEmptyArray(obj.Get("tools"))
	r.NoTools = !tools && !obj.Has("prompt")
	if tools {
		r.readContainers(obj.Get("tools"))
	}
	if err := r.readInstructions(); err != nil {
		return nil, err
	}
	if err := r.readInput(create); err != nil {
		return nil, err
	}
	return r, nil
}

// ProviderHistory reports whether the provider holds the history of the
// request's conversation: it continues a stored response
// (previous_response_id) or names a conversation of the Conversations API,
// whose items the provider puts before the input — and to which it adds
// the input for good. Memory then sends no stored turns, and what it
// recalls goes in the instructions, which the provider does not keep.
func (r *Request) ProviderHistory() bool { return r.PreviousResponseID != "" || r.InConversation }

// HeldHistory reports whether the request's history is held by the
// provider, wholly (ProviderHistory) or up to an item its input names by
// reference (see ParseRequest): memory then sends no stored turns, which would repeat
// what the provider reads.
func (r *Request) HeldHistory() bool { return r.ProviderHistory() || r.referenced }

// States are the provider states the request names: the stored response
// it continues, the conversation it is in, the stored items its input
// names by id alone (item references, reasoning items without their
// encrypted content) and the containers its tools name (readContainers),
// each with the id it gives ("" when the member holds none: an id no
// owner has).
func (r *Request) States() []memory.ProviderState {
	var out []memory.ProviderState
	if r.PreviousResponseID != "" {
		out = append(out, memory.ProviderState{Kind: memory.StateResponse, ID: r.PreviousResponseID})
	}
	if r.InConversation {
		out = append(out, memory.ProviderState{Kind: memory.StateConversation, ID: r.ConversationID})
	}
	for _, id := range r.itemRefs {
		out = append(out, memory.ProviderState{Kind: memory.StateItem, ID: id})
	}
	for _, id := range r.containers {
		out = append(out, memory.ProviderState{Kind: memory.StateContainer, ID: id})
	}
	return out
}

// readContainers reads the containers the tools name by id: a tool's
// container member given as a string (the code interpreter's, naming a
// container an earlier request's run left, with its files), by its exact
// name, as the provider reads it. A tool that gives a container and
// another member twice is recorded (repeat): which value counts would
// depend on the parser. The other forms ({"type": "auto"}: a new
// container) name none. The provider refuses tools that are not a list
// of objects.
func (r *Request) readContainers(tools json.RawMessage) {
	var list []json.RawMessage
	if json.Unmarshal(tools, &list) != nil {
		return
	}
	for i, t := range list {
		obj, repeated, ok := members(t)
		if !ok {
			continue
		}
		c, has := obj["container"]
		if !has {
			continue
		}
		r.repeat("tools["+strconv.Itoa(i)+"]", repeated)
		var id string
		if json.Unmarshal(c, &id) == nil {
			r.containers = append(r.containers, id)
		}
	}
}

// conversationID is the id a conversation member gives: the string, or
// the object's id; "" for anything else (the provider's to refuse). Of an
// object, repeated is the first member it gives twice (members).
func conversationID(c json.RawMessage) (id, repeated string) {
	if json.Unmarshal(c, &id) == nil {
		return id, ""
	}
	obj, repeated, _ := members(c)
	return exactString(obj, "id"), repeated
}

// RepeatedMember is the body (Param ""), an input item or a conversation
// object that gives the member Key twice by its exact name (once
// unescaped): encoding/json reads the last value and another parser may
// read the first, so which stored response, item or conversation it
// names — whether it names one at all — depends on the parser reading
// it, and checking the one memgate reads would not check the one the
// provider reads.
type RepeatedMember struct {
	Param, Key string
}

func (e *RepeatedMember) Error() string {
	return cmp.Or(e.Param, "the body") + " gives the member " + strconv.Quote(e.Key) + " more than once"
}

// Repeated is the first of the body, its input items and its
// conversation object that gives a member twice (RepeatedMember), nil
// when none: its States name what memgate reads, which the provider may
// not.
func (r *Request) Repeated() *RepeatedMember { return r.repeated }

// repeat records that param gives the member key twice, unless key is ""
// or an earlier one did.
func (r *Request) repeat(param, key string) {
	if key != "" && r.repeated == nil {
		r.repeated = &RepeatedMember{Param: param, Key: key}
	}
}

// idUse is how an input item gives its id (idOf).
type idUse int

const (
	// noID: the item gives none the provider reads, or memgate may drop.
	noID idUse = iota
	// byID: the provider reads the item it stored under the id
	// (reference).
	byID
	// beside: the item gives its content and an id memgate may drop
	// (carriesID).
	beside
)

// idOf returns the id the input item of members obj (members) gives
// and how: by id alone (the item is a reference) or beside its content
// (it carries one: carriesID); noID for neither. The item's id and type
// are decoded once.
func idOf(obj map[string]json.RawMessage) (string, idUse) {
	id, typ := exactString(obj, "id"), exactString(obj, "type")
	if reference(obj, id, typ) {
		return id, byID
	}
	if carriesID(id, typ) {
		return id, beside
	}
	return "", noID
}

// reference reports whether the provider reads the content of the input
// item of members obj (members), which gives id and typ, from the item
// it stored under the item's id: an item
// reference (type item_reference, or neither type nor role), or a
// reasoning item with an id sent without its encrypted content.
//
// A reasoning item with its encrypted_content names nothing stored: the
// provider reads its content from encrypted_content, which it issued for
// that item's id alone and verifies against the id the item gives ("The
// encrypted content for item rs_… could not be verified. Reason:
// Encrypted content item_id did not match the target item id."), and it
// accepts such items for ids it never stored (store: false responses,
// whose items it persists nowhere — the stateless use the field exists
// for). Another's id is then useless without the blob issued to its
// owner, so checking it would refuse every stateless client's reasoning
// and protect nothing. An empty or null encrypted_content is no content:
// the item is read by id. It reads
// the members by their exact names, as the provider does: encoding/json,
// which reads the rest of the item, matches names in any case, so that
// an item with "type" and "Type" reads as the type the provider ignores.
func reference(obj map[string]json.RawMessage, id, typ string) bool {
	_, typed := obj["type"]
	_, role := obj["role"]
	switch {
	case typ == "item_reference", !typed && !role:
		return true
	case typ == "reasoning":
		return id != "" && exactString(obj, "encrypted_content") == ""
	}
	return false
}

// ItemsBody is a body of the Conversations API that puts items in a
// conversation (creating it, or adding to it), read once.
type ItemsBody struct {
	raw      []byte
	obj      *body.Object
	items    []json.RawMessage
	refs     []memory.ProviderState
	carried  []carried
	required []RequiredID
}

// ParseItemsBody reads a body of the Conversations API that puts items in
// a conversation. It fails when the body is not a JSON object or items
// neither absent nor an array of objects, and with a *RepeatedMember when
// the body or an item gives a member twice: what the body names could
// not be told.
func ParseItemsBody(b []byte) (*ItemsBody, error) {
	obj, err := body.Parse(b)
	if err != nil {
		return nil, body.Invalid("", "%v", err)
	}
	if key := obj.Repeated(); key != "" {
		return nil, &RepeatedMember{Key: key}
	}
	ib := &ItemsBody{raw: b, obj: obj}
	if obj.Has("items") {
		if err := json.Unmarshal(obj.Get("items"), &ib.items); err != nil {
			return nil, body.Invalid("items", "items must be an array of items")
		}
	}
	for i, raw := range ib.items {
		obj, repeated, ok := members(raw)
		if !ok {
			return nil, body.Invalid("items["+strconv.Itoa(i)+"]", "an item must be an object")
		}
		if repeated != "" {
			return nil, &RepeatedMember{Param: "items[" + strconv.Itoa(i) + "]", Key: repeated}
		}
		switch id, use := idOf(obj); use {
		case byID:
			ib.refs = append(ib.refs, memory.ProviderState{Kind: memory.StateItem, ID: id})
		case beside:
			ib.carried = append(ib.carried, carried{index: i, id: id})
		}
		ib.required = append(ib.required, requiredIDs(obj, "items["+strconv.Itoa(i)+"]", exactString(obj, "type"))...)
	}
	return ib, nil
}

// RequiredIDs are the ids the body's items give that must be the
// caller's as sent, as Request.RequiredIDs.
func (b *ItemsBody) RequiredIDs() []RequiredID { return b.required }

// States are the stored items the body names by id alone (reference).
func (b *ItemsBody) States() []memory.ProviderState { return b.refs }

// CarriedIDs are the ids the body's items give beside their content, as
// Request.CarriedIDs.
func (b *ItemsBody) CarriedIDs() []memory.ProviderState { return carriedIDs(b.carried) }

// DropIDs removes the id member of each item of CarriedIDs whose drop is
// true and returns the body to send, as Request.DropIDs does.
func (b *ItemsBody) DropIDs(drop []bool) ([]byte, error) {
	changed, err := dropIDs(b.items, b.carried, drop)
	if err != nil || !changed {
		return b.raw, err
	}
	b.obj.Set("items", body.Array(b.items))
	b.raw = b.obj.Bytes()
	return b.raw, nil
}

// members are the members of the JSON object raw by their exact names
// (of a name given twice, the last), as the provider reads them, and the
// first name raw gives twice ("" when none: of a name given twice, a
// parser may read either value); false when raw is not an object.
func members(raw json.RawMessage) (obj map[string]json.RawMessage, repeated string, ok bool) {
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return nil, "", false
	}
	if memberCount(raw) != len(obj) {
		repeated = firstRepeated(raw)
	}
	return obj, repeated, true
}

// memberCount returns how many members the well-formed JSON object raw
// gives: its commas outside strings and nested values, and one. A byte
// scan that skips strings to their closing quote (bytes.IndexByte): a
// small part of what decoding raw costs, where reading the object member
// by member with encoding/json's Decoder cost as much again as decoding.
func memberCount(raw []byte) int {
	n, depth := 0, 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			if depth == 1 && n == 0 {
				n = 1 // the first member's name
			}
			i = closingQuote(raw, i+1)
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			if depth == 1 {
				n++
			}
		}
	}
	return n
}

// closingQuote returns the index of the quote that ends the JSON string
// whose text starts at raw[i] (len(raw) when none does): the first quote
// after an even run of backslashes.
func closingQuote(raw []byte, i int) int {
	for {
		j := bytes.IndexByte(raw[i:], '"')
		if j < 0 {
			return len(raw)
		}
		i += j
		k := i
		for raw[k-1] == '\\' {
			k--
		}
		if (i-k)%2 == 0 {
			return i
		}
		i++
	}
}

// firstRepeated returns the first name the well-formed JSON object raw
// gives twice, exactly ("" when none).
func firstRepeated(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		key := tok.(string) // inside an object the decoder yields keys as strings
		if seen[key] {
			return key
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return ""
		}
	}
	return ""
}

// exactString is obj's member key when it is a string, "" otherwise.
func exactString(obj map[string]json.RawMessage, key string) string {
	raw, ok := obj[key]
	var s string
	if !ok || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// InstructionItems reports whether the body gives instructions as an
// array of items. The API's request takes a string (its responses show
// an array, from a prompt template), and memgate reads such items' text
// only: item references and ids in them are not among States and
// CarriedIDs, so where those are checked the body is refused.
func (r *Request) InstructionItems() bool {
	return len(r.instructions) > 0 && r.instructions[0] == '['
}

// readInstructions reads instructions: a string, or an array of message
// items (InstructionItems), whose text becomes one system message.
func (r *Request) readInstructions() error {
	if !r.obj.Has("instructions") {
		return nil
	}
	r.instructions = r.obj.Get("instructions")
	var text string
	if r.instructions[0] == '"' {
		if err := json.Unmarshal(r.instructions, &text); err != nil {
			return body.Invalid("instructions", "instructions must be a string")
		}
	} else {
		var items []item
		if err := json.Unmarshal(r.instructions, &items); err != nil {
			return body.Invalid("instructions", "instructions must be a string or an array of input items")
		}
		var parts []chat.Part
		for _, it := range items {
			ps, _ := it.parts()
			parts = append(parts, ps...)
		}
		text = chat.TextOf(parts)
	}
	if text == "" {
		return nil
	}
	return r.add(chat.Message{Role: "system", Content: chat.Text(text)}, -1, "instructions")
}

// readInput reads the input member, which a create body (required) must
// give unless it names a previous response; another may give none, or
// null.
func (r *Request) readInput(required bool) error {
	r.input = r.obj.Get("input")
	if !r.obj.Has("input") || !required && string(r.input) == "null" {
		if r.PreviousResponseID == "" && required {
			return body.Invalid("input", "input is required")
		}
		return nil
	}
	if r.input[0] == '"' {
		var s string
		if err := json.Unmarshal(r.input, &s); err != nil {
			return body.Invalid("input", "input must be a string or an array of items")
		}
		r.inputString = true
		it, err := body.Marshal(struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}{"user", s})
		if err != nil {
			return body.Invalid("input", "%v", err)
		}
		r.items = []json.RawMessage{it}
		return r.add(chat.Message{Role: "user", Content: chat.Text(s)}, 0, "input")
	}
	if err := json.Unmarshal(r.input, &r.items); err != nil {
		return body.Invalid("input", "input must be a string or an array of items")
	}
	items := make([]item, len(r.items))
	for i, raw := range r.items {
		if err := json.Unmarshal(raw, &items[i]); err != nil {
			return body.Invalid("input["+strconv.Itoa(i)+"]", "an input item must be an object: %v", err)
		}
		if items[i].kind() == "" {
			return body.Invalid("input["+strconv.Itoa(i)+"]", "an input item needs a type or a role")
		}
		if obj, repeated, ok := members(raw); ok { // an object (decoded above)
			param := "input[" + strconv.Itoa(i) + "]"
			r.repeat(param, repeated)
			switch id, use := idOf(obj); use {
			case byID:
				r.itemRefs = append(r.itemRefs, id)
			case beside:
				r.carried = append(r.carried, carried{index: i, id: id})
			}
			r.required = append(r.required, requiredIDs(obj, param, exactString(obj, "type"))...)
		}
	}
	r.held = heldItems(items)
	r.referenced = r.held > 0
	msgs, origins, err := toChat(items[r.held:])
	if err != nil {
		return err
	}
	if len(msgs) == 0 && r.held > 0 {
		// Nothing follows what the provider holds: memory reads it all
		// (stored turns still stay out: HeldHistory).
		r.held = 0
		if msgs, origins, err = toChat(items); err != nil {
			return err
		}
	}
	for i, m := range msgs {
		o := r.held + origins[i]
		if err := r.add(m, o, "input["+strconv.Itoa(o)+"]"); err != nil {
			return err
		}
	}
	return nil
}

// heldItems returns how many items, from the first, the provider holds:
// through the last item_reference (0 when there is none), and the items of
// one assistant output right after it (function calls, reasoning, a
// message: the rest of the response the referenced item came from).
func heldItems(items []item) int {
	n := 0
	for i, it := range items {
		if it.Type == "item_reference" {
			n = i + 1
		}
	}
	for n > 0 && n < len(items) && (&assistant{}).add(items[n]) {
		n++
	}
	return n
}

// add appends one converted chat message.
func (r *Request) add(m chat.Message, origin int, param string) error {
	msg, err := r.Add(m, origin)
	if err != nil {
		return body.Invalid(param, "%v", err)
	}
	if memory.IsSystem(m.Role) {
		r.system[string(msg.Raw)] = true
	}
	return nil
}
