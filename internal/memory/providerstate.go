package memory

import "time"

// StateKind names a kind of state a provider keeps between requests.
type StateKind string

// The provider states a request can name by id.
const (
	// StateResponse is a stored response of the Responses API
	// (previous_response_id).
	StateResponse StateKind = "response"
	// StateConversation is a conversation of the Conversations API
	// (the Responses API's conversation).
	StateConversation StateKind = "conversation"
	// StateItem is an item of a stored response (an output message, a
	// reasoning item, a tool call), which a later request may name by id
	// alone (item_reference).
	StateItem StateKind = "item"
	// StateContainer is a container a provider runs tools' code in (the
	// Responses API's code interpreter), which holds the files earlier
	// runs uploaded and wrote; a later request may name it by id
	// (tools[].container) to run in it again.
	StateContainer StateKind = "container"
	// StateFile is a file of a provider's Files API (Anthropic's file_…)
	// that a run of the code execution tool wrote; a later request may
	// name it by id (a document or image source, a container_upload) to
	// read it.
	StateFile StateKind = "file"
)

// ProviderState is state a provider keeps for a client between requests —
// a stored response, a conversation — named by the id the provider gave
// out. With one provider key shared by every tenant, the provider cannot
// tell whose it is: memgate records that (StateBinding).
type ProviderState struct {
	Kind StateKind
	ID   string
}

// StateBinding records that provider states belong to a tenant's user:
// that user of that tenant alone may name them in a later request.
type StateBinding struct {
	Tenant, User string
	States       []ProviderState
	// At is when the request that created the state arrived: an erasure
	// of the user at or after it refuses the binding (ErrErased).
	At time.Time
	// Expires is when the binding lapses (the provider's own retention):
	// the state then reads as unknown, and the row may be removed.
	Expires time.Time
}
