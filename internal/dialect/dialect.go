// Package dialect reads a request body of any of the three APIs memgate
// serves with memory — OpenAI Chat Completions, Anthropic Messages, OpenAI
// Responses — into what the memory core needs (a memory.Request), and
// renders the core's answer (a memory.Prepared) back into that API's body.
// The proxy and the management API's preview both go through it, so the
// three APIs share one memory path: parse, assemble, render.
package dialect

import (
	"cmp"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/dialect/anthropic"
	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/dialect/chat"
	"github.com/memgate/memgate/internal/dialect/responses"
	"github.com/memgate/memgate/internal/memory"
)

// API names one of the APIs; the value is also the route's label in metrics
// and logs.
type API string

// The APIs memgate serves with memory.
const (
	// Chat is OpenAI Chat Completions (POST /v1/chat/completions).
	Chat API = "chat"
	// Messages is the Anthropic Messages API (POST /v1/messages).
	Messages API = "messages"
	// Responses is the OpenAI Responses API (POST /v1/responses).
	Responses API = "responses"
)

// ParseAPI returns the API named s ("chat", "messages", "responses"; ""
// is chat), or false.
func ParseAPI(s string) (API, bool) {
	switch API(s) {
	case "", Chat:
		return Chat, true
	case Messages, Responses:
		return API(s), true
	}
	return "", false
}

// Request is a request body of one API, read once.
type Request struct {
	API API
	// Raw is the body as the client sent it, less the ids DropIDs
	// dropped.
	Raw []byte
	// Model, Stream and MaxTokens are the body's; User is the body's user
	// value (chat and Responses user, else their safety_identifier, and
	// Anthropic metadata.user_id), as sent, "" when none: the memory user
	// it names is memory.BodyUserID's (identity.Resolver applies it).
	Model     string
	User      string
	Stream    bool
	MaxTokens int
	// Messages are the conversation as chat messages, each read once by
	// memory.ParseMessage.
	Messages []memory.Message
	// Thinking is true when the request turns on a reasoning whose signed
	// blocks its API takes back (Anthropic extended thinking;
	// memory.Request.ReplaysThinking).
	Thinking bool
	// NoRecent is true when the provider holds the history
	// (previous_response_id, a conversation of the Conversations API, or
	// input items named by id): memory is injected, stored turns are not.
	NoRecent bool
	// States are the provider states the request names (Responses API:
	// previous_response_id, conversation, items by id, the containers its
	// tools name; Messages API: its container), which the provider
	// resolves with the key the request goes upstream with.
	States []memory.ProviderState
	// CarriedIDs are the ids a Responses body's input items give beside
	// their content (responses.Request.CarriedIDs): the provider reads
	// the content, yet may hold a stored item under the id too. Where
	// States are checked, those not bound to the caller are dropped
	// (DropIDs).
	CarriedIDs []memory.ProviderState
	// RequiredIDs are the ids a Responses body's input items give that
	// the API requires as sent (responses.Request.RequiredIDs: a built-in
	// tool call's, the approval request an MCP approval answers): where
	// States are checked, one not bound to the caller is refused.
	RequiredIDs []responses.RequiredID
	// AmbiguousStates, when not nil, is the 400 for a Responses body,
	// input item or conversation object that gives a member twice
	// (responses.RepeatedMember): States hold what memgate reads of it,
	// and the provider may read the other value; or for instructions
	// given as items (responses.Request.InstructionItems), whose
	// references and ids are not among States and CarriedIDs; or for a
	// Messages body naming a container that gives a member twice, or
	// whose container object does. Where States are checked, the request
	// is refused with it.
	AmbiguousStates *apierr.Error
	// Stateless is true when the provider keeps nothing the reply creates
	// (Responses store: false), so no later request can name the
	// response; its output items come back with their ids.
	Stateless bool
	// Background is true when a Responses body asks for a background
	// response (background: true), answered later.
	Background bool
	// NoTools is true when the body declares no tools
	// (memory.Request.NoTools).
	NoTools bool

	render func(memory.Prepared) ([]byte, error)
	// messages is the Anthropic request (Messages API only).
	messages *anthropic.Request
	// responses is the Responses request (Responses API only).
	responses *responses.Request
}

// DropIDs removes from the body the ids of CarriedIDs whose drop is true
// (one flag per id): Raw and what Render renders go upstream without
// them, the items' content as sent.
func (r *Request) DropIDs(drop []bool) error {
	if r.responses == nil {
		return nil
	}
	raw, err := r.responses.DropIDs(drop)
	if err != nil {
		return err
	}
	r.Raw = raw
	return nil
}

// SetCacheBreakpoints asks Render to add Anthropic cache_control
// breakpoints after the stable part of the prompt (Messages API only; the
// other APIs' providers cache prefixes without them).
func (r *Request) SetCacheBreakpoints(on bool) {
	if r.messages != nil {
		r.messages.Breakpoints = on
	}
}

// ThinkingDisabled reports whether the body Render last returned turns off
// the extended thinking the client asked for (anthropic.Request.Render:
// a replayed tool call with no signed reasoning to send back).
func (r *Request) ThinkingDisabled() bool {
	return r.messages != nil && r.messages.ThinkingDisabled()
}

// Parse reads a body of api. A body that breaks the API's rules is a 400
// naming the offending parameter.
func Parse(api API, raw []byte) (*Request, *apierr.Error) {
	switch api {
	case Messages:
		r, err := anthropic.ParseRequest(raw)
		if err != nil {
			return nil, invalid(err)
		}
		var repeated *apierr.Error
		if param, key := r.Repeated(); key != "" {
			repeated = apierr.RepeatedKey(param, key)
		}
		return &Request{API: api, Raw: raw, Model: r.Model, User: r.User, Stream: r.Stream, MaxTokens: r.MaxTokens,
			Messages: r.Messages, NoTools: r.NoTools, Thinking: r.Thinking, States: r.States(), AmbiguousStates: repeated,
			render: r.Render, messages: r}, nil
	case Responses:
		r, err := responses.ParseRequest(raw)
		if err != nil {
			return nil, invalid(err)
		}
		return &Request{API: api, Raw: raw, Model: r.Model, User: cmp.Or(r.User, r.SafetyIdentifier), Stream: r.Stream, MaxTokens: r.MaxTokens,
			Messages: r.Messages, NoRecent: r.HeldHistory(), States: r.States(), CarriedIDs: r.CarriedIDs(), RequiredIDs: r.RequiredIDs(), AmbiguousStates: ambiguous(r),
			Stateless: r.NoStore, Background: r.Background, NoTools: r.NoTools, render: r.Render, responses: r}, nil
	}
	r, err := chat.ParseRequest(raw)
	if err != nil {
		return nil, invalid(err)
	}
	return &Request{API: Chat, Raw: raw, Model: r.Model, User: cmp.Or(r.User, r.SafetyIdentifier), Stream: r.Stream, MaxTokens: r.MaxTokens,
		Messages: r.Messages, NoTools: r.NoTools, render: r.Render}, nil
}

// StateBody is what the body of a passthrough request under the
// operator's key names of provider state: the States the provider reads
// by id and the RequiredIDs its items give (responses.RequiredID), which
// must be the caller's, and the CarriedIDs its items give beside their
// content (responses.Request.CarriedIDs), which DropIDs removes when
// they are not.
type StateBody struct {
	States, CarriedIDs []memory.ProviderState
	RequiredIDs        []responses.RequiredID
	drop               func([]bool) ([]byte, error)
}

// DropIDs returns the body to send without the ids of CarriedIDs whose
// drop is true (one flag per id): as read when none is.
func (b *StateBody) DropIDs(drop []bool) ([]byte, error) { return b.drop(drop) }

// ConversationItems reads a Conversations API body that puts items in a
// conversation: the stored items it names by id alone
// (responses.ItemsBody.States) and the ids its items give beside their
// content; a body they cannot be told from is a 400.
func ConversationItems(raw []byte) (*StateBody, *apierr.Error) {
	b, err := responses.ParseItemsBody(raw)
	if rm := (*responses.RepeatedMember)(nil); errors.As(err, &rm) {
		return nil, repeatedMember(rm)
	}
	if err != nil {
		return nil, invalid(err)
	}
	return &StateBody{States: b.States(), CarriedIDs: b.CarriedIDs(), RequiredIDs: b.RequiredIDs(), drop: b.DropIDs}, nil
}

// ambiguous is the 400 for a Responses body whose states memgate cannot
// check as the provider reads them (Request.AmbiguousStates), nil when
// it can.
func ambiguous(r *responses.Request) *apierr.Error {
	return cmp.Or(repeatedMember(r.Repeated()), instructionItems(r))
}

// repeatedMember is the 400 for e (apierr.RepeatedKey), nil when e is.
func repeatedMember(e *responses.RepeatedMember) *apierr.Error {
	if e == nil {
		return nil
	}
	return apierr.RepeatedKey(e.Param, e.Key)
}

// instructionItems is the 400 for a Responses body whose instructions are
// an array of items (responses.Request.InstructionItems), nil for any
// other: the item references and ids in them are not checked.
func instructionItems(r *responses.Request) *apierr.Error {
	if !r.InstructionItems() {
		return nil
	}
	return apierr.Invalid("instructions", "instructions must be a string: this gateway does not forward instructions given as items under its shared upstream key.")
}

// invalid turns an adapter's parse error into a 400.
func invalid(err error) *apierr.Error {
	var fe *body.FieldError
	if errors.As(err, &fe) {
		return apierr.Invalid(fe.Param, fe.Msg)
	}
	return apierr.Invalid("", err.Error())
}

// Memory returns what the memory core is asked for this request, with the
// X-Memory-Budget and X-Memory-Cross headers of h. A Chat Completions
// message whose turn may be stored (mode stores, for a user) must give no
// key twice (memory.RepeatedKey), else it is a 400 naming it: its JSON is
// stored and replayed verbatim, and an upstream could read another role
// than the one memgate checked. (The other APIs' messages are memgate's
// own encoding of the client's.) A message capture leaves unstored (cut,
// the request's memory.Cut of its Messages: r.Messages[cut.From:cut.To];
// the zero Cut: none) is not checked: it is forwarded as the client sent
// it, never stored.
func (r *Request) Memory(h http.Header, id memory.Identity, mode memory.Mode, cut memory.Cut) (memory.Request, *apierr.Error) {
	if r.API == Chat && mode.Stores() && id.User != "" {
		for i, m := range r.Messages {
			if cut.From <= i && i < cut.To && !memory.IsSystem(m.Role) {
				continue
			}
			if key, dup := memory.RepeatedKey(m.Raw); dup {
				return memory.Request{}, apierr.RepeatedKey("messages["+strconv.Itoa(i)+"]", key)
			}
		}
	}
	return Headers(h, memory.Request{
		Identity:  id,
		Mode:      mode,
		Model:     r.Model,
		Messages:  r.Messages,
		MaxTokens: r.MaxTokens,
		NoRecent:  r.NoRecent,
		NoTools:   r.NoTools,
		// Anthropic requires a tool loop's call back with its signed
		// thinking when thinking is on.
		ReplaysThinking: r.Thinking,
		// Chat Completions renders each block where it stands; Anthropic
		// Messages and the Responses API put a resent turn's block back
		// in that turn (anthropic.Request.Render, responses.Request.Render),
		// among the client's own messages: when the client resends its
		// history.
		BlocksInPlace: r.API == Chat || r.inPlace() && resendsHistory(r.Messages),
		// Each puts a block sent with a turn back in that turn when the
		// client resends it.
		ResentInPlace: r.API == Chat || r.inPlace(),
	})
}

// inPlace reports whether r's API puts a recalled block back in the
// resent user message it was sent with: Anthropic Messages, and the
// Responses API when the client holds the history (NoRecent false: the
// provider holds none of it, and would keep a block put in its input for
// good; recall then goes in the instructions).
func (r *Request) inPlace() bool {
	return r.API == Messages || r.API == Responses && !r.NoRecent
}

// resendsHistory reports whether msgs hold turns before the current one
// (memory.SplitCurrent): a client that resends its history.
func resendsHistory(msgs []memory.Message) bool {
	var rest []memory.Message
	for _, m := range msgs {
		if !memory.IsSystem(m.Role) {
			rest = append(rest, m)
		}
	}
	earlier, _ := memory.SplitCurrent(rest)
	return len(earlier) > 0
}

// Headers completes req, a memory request of any API, with the request's
// X-Memory-Budget (a whole number ≥ 1) and X-Memory-Cross (off, false or 0
// disables cross-conversation recall; on, true, 1 or none leaves it on)
// headers. Any other value of either is a 400 naming the header: a value
// memgate cannot read must not recall what the client asked to keep out.
func Headers(h http.Header, req memory.Request) (memory.Request, *apierr.Error) {
	cross, aerr := OnOff(h, "X-Memory-Cross", true)
	if aerr != nil {
		return req, aerr
	}
	req.CrossConversation = cross
	if v := h.Get("X-Memory-Budget"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return req, apierr.Invalid("X-Memory-Budget", "X-Memory-Budget must be a whole number of tokens, at least 1.")
		}
		req.Budget = n
	}
	return req, nil
}

// OnOff reads the on/off header name of h: on, true or 1 is true; off,
// false or 0 is false, in any case and with spaces around; absent or empty
// it is unset. Any other value is a 400 naming the header
// (apierr.Invalid), never read as either: a value memgate cannot read must
// not turn on or off what the client did not ask for.
func OnOff(h http.Header, name string, unset bool) (bool, *apierr.Error) {
	switch strings.ToLower(strings.TrimSpace(h.Get(name))) {
	case "":
		return unset, nil
	case "on", "true", "1":
		return true, nil
	case "off", "false", "0":
		return false, nil
	}
	return false, apierr.Invalid(name, name+" must be on or off.")
}

// Render returns the body to send upstream for p, the memory core's answer
// to this request's memory.Request: the API's adapter puts the memory and
// the stored turns where that API wants them and keeps every other member
// as the client sent it.
func (r *Request) Render(p memory.Prepared) ([]byte, error) { return r.render(p) }

// MessagesStates reads the body of a Messages token count
// (/v1/messages/count_tokens): the provider states it names, as a create
// body's (Request.States: its container, the files its messages name;
// anthropic.ReadStates); one whose container object or body gives a
// member twice (Request.AmbiguousStates) is a 400. The rest of the body
// is the provider's to check.
func MessagesStates(raw []byte) (*StateBody, *apierr.Error) {
	states, param, key := anthropic.ReadStates(raw)
	if key != "" {
		return nil, apierr.RepeatedKey(param, key)
	}
	return &StateBody{States: states, drop: func([]bool) ([]byte, error) { return raw, nil }}, nil
}

// ResponsesStates reads the body of a request to a fixed sub-path of the
// Responses API (input_tokens, compact): the provider states it names and
// the ids its items carry, as a create body's (Request.States,
// Request.CarriedIDs); a body that breaks the API's rules, gives a
// member twice or gives instructions as items (Request.AmbiguousStates)
// is a 400.
func ResponsesStates(raw []byte) (*StateBody, *apierr.Error) {
	r, err := responses.ParseStateBody(raw)
	if err != nil {
		return nil, invalid(err)
	}
	if aerr := ambiguous(r); aerr != nil {
		return nil, aerr
	}
	return &StateBody{States: r.States(), CarriedIDs: r.CarriedIDs(), RequiredIDs: r.RequiredIDs(), drop: r.DropIDs}, nil
}
