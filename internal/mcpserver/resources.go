package mcpserver

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/internal/memory"
)

// The resource URIs.
const (
	factsTemplate   = "memgate://users/{user}/facts"
	summaryTemplate = "memgate://users/{user}/conversations/{conversation}/summary"
	uriPrefix       = "memgate://users/"
)

func (t *tenantTools) registerResources(srv *mcp.Server) {
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "facts", Title: "A user's facts", URITemplate: factsTemplate, MIMEType: "application/json",
		Description: "The facts memgate currently keeps about the user, pinned ones included."}, t.readFacts)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "summary", Title: "A conversation's summary", URITemplate: summaryTemplate, MIMEType: "application/json",
		Description: "The newest rolling summary of the conversation (what older turns said, with the numbers, dates and decisions kept verbatim)."}, t.readSummary)
}

// parseURI splits a resource URI under memgate://users/ into its user and
// the segments after it, each a valid id; ok is false otherwise.
func parseURI(uri string) (user string, rest []string, ok bool) {
	path, found := strings.CutPrefix(uri, uriPrefix)
	if !found {
		return "", nil, false
	}
	parts := strings.Split(path, "/")
	if len(parts) < 2 || !memory.ValidID(parts[0]) {
		return "", nil, false
	}
	return parts[0], parts[1:], true
}

// jsonResource answers v as the resource's JSON text.
func jsonResource(uri string, v any) (*mcp.ReadResourceResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

func (t *tenantTools) readFacts(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	user, rest, ok := parseURI(uri)
	if !ok || len(rest) != 1 || rest[0] != "facts" {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	facts, err := t.facts(ctx, user, false)
	if err != nil {
		return nil, err
	}
	return jsonResource(uri, map[string]any{"user": user, "facts": facts})
}

func (t *tenantTools) readSummary(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	user, rest, ok := parseURI(uri)
	if !ok || len(rest) != 3 || rest[0] != "conversations" || !memory.ValidID(rest[1]) || rest[2] != "summary" {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if t.s.deps.Summaries == nil {
		return nil, errNotConfigured("summaries")
	}
	sums, err := t.s.deps.Summaries.Summaries(ctx, memory.Identity{Tenant: t.tenant, User: user, Conversation: rest[1]})
	if err != nil {
		return nil, t.fail(ctx, "summary", err)
	}
	if len(sums) == 0 {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	return jsonResource(uri, sums[len(sums)-1])
}
