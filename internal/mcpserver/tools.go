package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/internal/admin"
	"github.com/memgate/memgate/internal/memory"
)

// tenantTools are the tools of a Server acting for tenant.
type tenantTools struct {
	s      *Service
	tenant string
}

// Tool inputs. Every one names its user explicitly.
type (
	userInput struct {
		User string `json:"user" jsonschema:"the user id, as the chat application sends it in X-Memory-User or the body's user field (a body value that is not an id is stored as u- and a digest of it, which the management API and the inspector name)"`
	}
	searchInput struct {
		User         string `json:"user" jsonschema:"the user whose memory to search"`
		Query        string `json:"query" jsonschema:"what to look for, in plain words"`
		TopK         int    `json:"top_k,omitempty" jsonschema:"how many passages to return, 1-50 (default: the gateway's recall.top_k)"`
		Conversation string `json:"conversation,omitempty" jsonschema:"search only this conversation; omit to search all of the user's conversations"`
	}
	conversationInput struct {
		User         string `json:"user" jsonschema:"the user the conversation belongs to"`
		Conversation string `json:"conversation" jsonschema:"the conversation id"`
		Limit        int    `json:"limit,omitempty" jsonschema:"the most messages to read, 1 to 1000 (default 100)"`
		After        int64  `json:"after,omitempty" jsonschema:"read the messages after this seq (the last_id of the page before); 0 or omitted: from the first"`
		Before       int64  `json:"before,omitempty" jsonschema:"read the last messages before this seq (the first_id of the page after; 1: none); 0 or omitted: not given"`
	}
	listFactsInput struct {
		User    string `json:"user" jsonschema:"the user whose facts to list"`
		History bool   `json:"history,omitempty" jsonschema:"include superseded and expired facts"`
	}
	addFactInput struct {
		User       string   `json:"user" jsonschema:"the user the fact is about"`
		Type       string   `json:"type" jsonschema:"one of profile, preference, goal, limit, decision, relationship, event"`
		Key        string   `json:"key" jsonschema:"the subject, e.g. city or diet (a new value for the same type and key supersedes the old one)"`
		Value      string   `json:"value" jsonschema:"the fact itself, e.g. lives in Porto"`
		Confidence *float64 `json:"confidence,omitempty" jsonschema:"how sure, greater than 0 and at most 1 (default 1)"`
		Pinned     bool     `json:"pinned,omitempty" jsonschema:"always put this fact in the prompt"`
	}
	factInput struct {
		User string `json:"user" jsonschema:"the user the fact belongs to"`
		ID   int64  `json:"id" jsonschema:"the fact id, from list_facts"`
	}
	previewInput struct {
		User         string `json:"user" jsonschema:"the user asking"`
		Question     string `json:"question" jsonschema:"the user's next message"`
		Conversation string `json:"conversation,omitempty" jsonschema:"the conversation the message belongs to (default: the one memgate derives for a first message)"`
		Model        string `json:"model,omitempty" jsonschema:"the model the request would name (decides the token budget)"`
	}
	eraseInput struct {
		User    string `json:"user" jsonschema:"the user to erase"`
		Confirm string `json:"confirm" jsonschema:"must repeat the user id exactly: erasing cannot be undone"`
	}
)

// annotations returns tool hints: read-only, or changing (destructive when
// it removes something).
func annotations(title string, readOnly, destructive bool) *mcp.ToolAnnotations {
	closed := false
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: readOnly, DestructiveHint: &destructive, IdempotentHint: readOnly || destructive, OpenWorldHint: &closed}
}

func (t *tenantTools) register(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: "search_memory", Annotations: annotations("Search memory", true, false),
		Description: "Search what a user said before (turns, summaries, facts), best first, in one conversation or all of them."}, t.search)
	mcp.AddTool(srv, &mcp.Tool{Name: "list_conversations", Annotations: annotations("List conversations", true, false),
		Description: "List a user's conversations, most recently active first."}, t.listConversations)
	mcp.AddTool(srv, &mcp.Tool{Name: "read_conversation", Annotations: annotations("Read a conversation", true, false),
		Description: "Read a page of a conversation's stored messages, oldest first; has_more says more follow (read them with after: last_id, or earlier ones with before: first_id). after and before 0 mean not given."}, t.readConversation)
	mcp.AddTool(srv, &mcp.Tool{Name: "list_facts", Annotations: annotations("List facts", true, false),
		Description: "List the facts memgate keeps about a user (current ones, or with history the superseded and expired too)."}, t.listFacts)
	mcp.AddTool(srv, &mcp.Tool{Name: "add_fact", Annotations: annotations("Add a fact", false, false),
		Description: "Record a fact about a user; it reaches the prompt of the user's next chat requests. The same type and key with another value supersedes the old fact."}, t.addFact)
	mcp.AddTool(srv, &mcp.Tool{Name: "pin_fact", Annotations: annotations("Pin a fact", false, false),
		Description: "Pin a current fact: it is then always put in the prompt."}, t.pin(true))
	mcp.AddTool(srv, &mcp.Tool{Name: "unpin_fact", Annotations: annotations("Unpin a fact", false, false),
		Description: "Unpin a fact: it is then put in the prompt only when relevant."}, t.pin(false))
	mcp.AddTool(srv, &mcp.Tool{Name: "delete_fact", Annotations: annotations("Delete a fact", false, true),
		Description: "Delete one of a user's facts."}, t.deleteFact)
	mcp.AddTool(srv, &mcp.Tool{Name: "preview_prompt", Annotations: annotations("Preview the prompt", true, false),
		Description: "Show the prompt memgate would send the model for a user's next message (memory included) and its token accounting, without calling the model."}, t.preview)
	mcp.AddTool(srv, &mcp.Tool{Name: "erase_user", Annotations: annotations("Erase a user", false, true),
		Description: "Erase everything stored about a user in this tenant: conversations, summaries, facts, search index. Cannot be undone; confirm must repeat the user id."}, t.erase)
}

// errInvalid marks a bad argument; its message is the client's to read.
type errInvalid struct{ msg string }

func (e errInvalid) Error() string { return "invalid argument: " + e.msg }

// checkUser validates a user id argument.
func checkUser(user string) error {
	if !memory.ValidID(user) {
		return errInvalid{"user must be " + memory.IDChars}
	}
	return nil
}

// checkConversation validates a conversation id argument.
func checkConversation(id string) error {
	if !memory.ValidID(id) {
		return errInvalid{"conversation must be " + memory.IDChars}
	}
	return nil
}

// fail turns a service error into what the client is told, logging what
// it is not.
func (t *tenantTools) fail(ctx context.Context, op string, err error) error {
	switch {
	case errors.Is(err, memory.ErrInvalid):
		return errInvalid{strings.TrimPrefix(err.Error(), memory.ErrInvalid.Error()+": ")}
	case errors.Is(err, memory.ErrNotFound):
		return errors.New("not found for this user in this tenant")
	}
	t.s.log.WarnContext(ctx, "mcp tool failed", "tool", op, "error", err)
	if errors.Is(err, memory.ErrUnavailable) {
		return errors.New("memory is not connected yet: try again later")
	}
	return errors.New("the memory store could not be reached")
}

// errNotConfigured answers a tool whose service the gateway lacks.
func errNotConfigured(what string) error {
	return fmt.Errorf("%s is not configured on this gateway", what)
}

// result answers v as JSON text and as structured content.
func result(v map[string]any) (*mcp.CallToolResult, any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, nil, fmt.Errorf("encode result: %w", err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil, nil
}

func (t *tenantTools) search(ctx context.Context, _ *mcp.CallToolRequest, in searchInput) (*mcp.CallToolResult, any, error) {
	if err := checkUser(in.User); err != nil {
		return nil, nil, err
	}
	if in.Conversation != "" {
		if err := checkConversation(in.Conversation); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case strings.TrimSpace(in.Query) == "":
		return nil, nil, errInvalid{"query must not be empty"}
	case len(in.Query) > admin.MaxSearchQuery:
		return nil, nil, errInvalid{"query must be at most " + strconv.Itoa(admin.MaxSearchQuery) + " bytes"}
	case in.TopK < 0 || in.TopK > admin.MaxSearchTopK:
		return nil, nil, errInvalid{"top_k must be between 1 and " + strconv.Itoa(admin.MaxSearchTopK)}
	}
	if t.s.deps.Recall == nil {
		return nil, nil, errNotConfigured("recall")
	}
	items, err := t.s.deps.Recall.SearchIn(ctx, t.tenant, in.User, in.Conversation, in.Query, in.TopK)
	if err != nil {
		return nil, nil, t.fail(ctx, "search_memory", err)
	}
	if items == nil {
		items = []memory.Item{}
	}
	return result(map[string]any{"results": items})
}

func (t *tenantTools) listConversations(ctx context.Context, _ *mcp.CallToolRequest, in userInput) (*mcp.CallToolResult, any, error) {
	if err := checkUser(in.User); err != nil {
		return nil, nil, err
	}
	convs, err := t.s.deps.Store.Conversations(ctx, t.tenant, in.User)
	if err != nil {
		return nil, nil, t.fail(ctx, "list_conversations", err)
	}
	if convs == nil {
		convs = []memory.Conversation{}
	}
	return result(map[string]any{"conversations": convs})
}

// message is a stored message as read_conversation shows it.
type message struct {
	Seq       int64     `json:"seq"`
	Role      string    `json:"role"`
	Content   string    `json:"content"`
	CreatedAt time.Time `json:"created_at"`
}

func (t *tenantTools) readConversation(ctx context.Context, _ *mcp.CallToolRequest, in conversationInput) (*mcp.CallToolResult, any, error) {
	if err := checkUser(in.User); err != nil {
		return nil, nil, err
	}
	if err := checkConversation(in.Conversation); err != nil {
		return nil, nil, err
	}
	p := memory.Page{After: in.After, Limit: cmp.Or(in.Limit, admin.DefaultPageMessages)}
	// 0 is "not given" here, unlike the management API's before=0 (an
	// empty page): a model calling the tool fills optional integers with 0.
	if in.Before != 0 {
		p.Before, p.Backward = in.Before, true
	}
	switch {
	case p.Limit < 1 || p.Limit > admin.MaxPageMessages:
		return nil, nil, errInvalid{"limit must be from 1 to " + strconv.Itoa(admin.MaxPageMessages)}
	case p.After < 0 || p.Before < 0 || (p.After > 0 && p.Backward):
		return nil, nil, errInvalid{"after and before are seqs, one of them at most"}
	}
	page, err := admin.ReadPage(ctx, t.s.deps.Store, memory.Identity{Tenant: t.tenant, User: in.User, Conversation: in.Conversation}, p)
	if err != nil {
		return nil, nil, t.fail(ctx, "read_conversation", err)
	}
	out := make([]message, len(page.Messages))
	for i, m := range page.Messages {
		out[i] = message{Seq: m.Seq, Role: m.Role, Content: m.Content, CreatedAt: m.CreatedAt}
	}
	answer := map[string]any{"conversation": page.Conversation, "messages": out, "first_id": nil, "last_id": nil, "has_more": page.HasMore}
	if n := len(out); n > 0 {
		answer["first_id"], answer["last_id"] = out[0].Seq, out[n-1].Seq
	}
	return result(answer)
}

func (t *tenantTools) listFacts(ctx context.Context, _ *mcp.CallToolRequest, in listFactsInput) (*mcp.CallToolResult, any, error) {
	if err := checkUser(in.User); err != nil {
		return nil, nil, err
	}
	facts, err := t.facts(ctx, in.User, in.History)
	if err != nil {
		return nil, nil, err
	}
	return result(map[string]any{"facts": facts})
}

// facts lists a user's facts for a tool or a resource.
func (t *tenantTools) facts(ctx context.Context, user string, history bool) ([]memory.Fact, error) {
	if t.s.deps.Recall == nil {
		return nil, errNotConfigured("recall")
	}
	facts, err := t.s.deps.Recall.Facts(ctx, t.tenant, user, history)
	if err != nil {
		return nil, t.fail(ctx, "list_facts", err)
	}
	if facts == nil {
		facts = []memory.Fact{}
	}
	return facts, nil
}

func (t *tenantTools) addFact(ctx context.Context, _ *mcp.CallToolRequest, in addFactInput) (*mcp.CallToolResult, any, error) {
	if err := checkUser(in.User); err != nil {
		return nil, nil, err
	}
	f := memory.Fact{Tenant: t.tenant, User: in.User, Type: memory.FactType(in.Type), Key: in.Key, Value: in.Value, Pinned: in.Pinned}
	if in.Confidence != nil {
		if *in.Confidence <= 0 || *in.Confidence > 1 {
			return nil, nil, errInvalid{"confidence must be greater than 0 and at most 1"}
		}
		f.Confidence = *in.Confidence
	}
	if t.s.deps.Recall == nil {
		return nil, nil, errNotConfigured("recall")
	}
	cur, err := t.s.deps.Recall.AddFact(ctx, f)
	if err != nil {
		return nil, nil, t.fail(ctx, "add_fact", err)
	}
	return result(map[string]any{"fact": cur})
}

// checkFact validates a fact tool's arguments.
func checkFact(in factInput) error {
	if err := checkUser(in.User); err != nil {
		return err
	}
	if in.ID <= 0 {
		return errInvalid{"id must be a positive fact id"}
	}
	return nil
}

func (t *tenantTools) pin(pinned bool) mcp.ToolHandlerFor[factInput, any] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in factInput) (*mcp.CallToolResult, any, error) {
		if err := checkFact(in); err != nil {
			return nil, nil, err
		}
		if t.s.deps.Pinner == nil {
			return nil, nil, errNotConfigured("pinning")
		}
		if err := t.s.deps.Pinner.SetFactPinned(ctx, t.tenant, in.User, in.ID, pinned); err != nil {
			return nil, nil, t.fail(ctx, "pin_fact", err)
		}
		return result(map[string]any{"id": in.ID, "pinned": pinned})
	}
}

func (t *tenantTools) deleteFact(ctx context.Context, _ *mcp.CallToolRequest, in factInput) (*mcp.CallToolResult, any, error) {
	if err := checkFact(in); err != nil {
		return nil, nil, err
	}
	if t.s.deps.Recall == nil {
		return nil, nil, errNotConfigured("recall")
	}
	if err := t.s.deps.Recall.DeleteFact(ctx, t.tenant, in.User, in.ID); err != nil {
		return nil, nil, t.fail(ctx, "delete_fact", err)
	}
	return result(map[string]any{"id": in.ID, "deleted": true})
}

func (t *tenantTools) erase(ctx context.Context, _ *mcp.CallToolRequest, in eraseInput) (*mcp.CallToolResult, any, error) {
	if err := checkUser(in.User); err != nil {
		return nil, nil, err
	}
	if in.Confirm != in.User {
		return nil, nil, errInvalid{"confirm must repeat the user id exactly; nothing was erased"}
	}
	if err := t.s.deps.Store.DeleteUser(ctx, t.tenant, in.User); err != nil {
		return nil, nil, t.fail(ctx, "erase_user", err)
	}
	t.s.log.InfoContext(ctx, "user erased over mcp", "tenant", t.tenant)
	return result(map[string]any{"user": in.User, "erased": true})
}
