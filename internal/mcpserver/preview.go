package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/internal/dialect"
	"github.com/memgate/memgate/internal/memory"
)

// preview answers preview_prompt: the chat completion a client would send
// with the question as its one new message, assembled as the management
// API's preview does (dialect parsing, the implied conversation, the
// memory core's Prepare); the upstream is never called.
func (t *tenantTools) preview(ctx context.Context, _ *mcp.CallToolRequest, in previewInput) (*mcp.CallToolResult, any, error) {
	if err := checkUser(in.User); err != nil {
		return nil, nil, err
	}
	if in.Conversation != "" {
		if err := checkConversation(in.Conversation); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case strings.TrimSpace(in.Question) == "":
		return nil, nil, errInvalid{"question must not be empty"}
	case len(in.Question) > t.s.opts.MaxQuestionBytes:
		return nil, nil, errInvalid{"question must be at most " + strconv.Itoa(t.s.opts.MaxQuestionBytes) + " bytes"}
	}
	if t.s.deps.Preparer == nil {
		return nil, nil, errNotConfigured("memory")
	}
	model := in.Model
	if model == "" {
		model = t.s.opts.PreviewModel
	}
	raw, err := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": in.Question}}})
	if err != nil {
		return nil, nil, err
	}
	req, aerr := dialect.Parse(dialect.Chat, raw)
	if aerr != nil {
		return nil, nil, errInvalid{aerr.Message}
	}
	id := memory.Identity{Tenant: t.tenant, User: in.User, Conversation: in.Conversation}
	if id.Conversation == "" {
		id.Conversation = memory.ImpliedConversation(id.Tenant, id.User, req.Messages)
	}
	mreq, aerr := req.Memory(http.Header{}, id, memory.ModeOn, memory.Cut{})
	if aerr != nil {
		return nil, nil, errInvalid{aerr.Message}
	}
	p, err := t.s.deps.Preparer.Prepare(ctx, mreq)
	if err != nil {
		return nil, nil, t.fail(ctx, "preview_prompt", err)
	}
	degraded := p.Degraded
	if degraded == nil {
		degraded = []string{}
	}
	return result(map[string]any{
		"conversation": id.Conversation, "model": model, "messages": p.Messages,
		"tokens_original": p.TokensOriginal, "tokens_sent": p.TokensSent, "over_budget": p.OverBudget,
		"budget": p.Budget, "parts": p.Parts, "degraded": degraded,
	})
}
