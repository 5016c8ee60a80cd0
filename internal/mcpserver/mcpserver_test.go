package mcpserver

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/internal/memory"
)

// fakeStore records the tenants and users it is asked for.
type fakeStore struct {
	mu     sync.Mutex
	calls  []string
	erased []string
}

func (f *fakeStore) note(tenant, user string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, tenant+"/"+user)
}

func (f *fakeStore) Conversations(_ context.Context, tenant, user string) ([]memory.Conversation, error) {
	f.note(tenant, user)
	return nil, nil
}

func (f *fakeStore) Conversation(_ context.Context, id memory.Identity) (memory.Conversation, []memory.Message, error) {
	f.note(id.Tenant, id.User)
	return memory.Conversation{}, nil, memory.ErrNotFound
}

func (f *fakeStore) ConversationPage(ctx context.Context, id memory.Identity, _ memory.Page) (memory.Conversation, []memory.Message, error) {
	return f.Conversation(ctx, id)
}

func (f *fakeStore) DeleteUser(_ context.Context, tenant, user string) error {
	f.note(tenant, user)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.erased = append(f.erased, tenant+"/"+user)
	return nil
}

func connect(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

// TestToolsActForTheServersTenant: every call reaches the services with
// the Server's tenant and the argument's user (an argument naming a tenant
// is refused by the tool's schema); bad ids, a missing service and an unconfirmed erasure are refused
// before any service is called.
func TestToolsActForTheServersTenant(t *testing.T) {
	st := &fakeStore{}
	svc := New(Deps{Store: st}, Options{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	cs := connect(t, svc.Server("tenant-a"))

	if msg, isErr := call(t, cs, "list_conversations", map[string]any{"user": "bob", "tenant": "tenant-b"}); !isErr {
		t.Fatalf("a tenant argument must be refused, got %q", msg)
	}
	if _, isErr := call(t, cs, "list_conversations", map[string]any{"user": "bob"}); isErr {
		t.Fatal("list_conversations failed")
	}
	if msg, isErr := call(t, cs, "read_conversation", map[string]any{"user": "bob", "conversation": "c"}); !isErr || !strings.Contains(msg, "not found") {
		t.Fatalf("read_conversation of a missing conversation: %q", msg)
	}
	refused := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"list_conversations", map[string]any{"user": "bob smith"}, "user"},
		{"list_conversations", map[string]any{"user": ""}, "user"},
		{"read_conversation", map[string]any{"user": "bob", "conversation": "a/b"}, "conversation"},
		{"erase_user", map[string]any{"user": "bob", "confirm": "Bob"}, "confirm"},
		{"erase_user", map[string]any{"user": "bob"}, "confirm"},
		{"search_memory", map[string]any{"user": "bob", "query": "x", "top_k": 51}, "top_k"},
		{"search_memory", map[string]any{"user": "bob", "query": "x"}, "not configured"},
		{"preview_prompt", map[string]any{"user": "bob", "question": "hi"}, "not configured"},
		{"pin_fact", map[string]any{"user": "bob", "id": 0}, "id"},
	}
	for _, r := range refused {
		if msg, isErr := call(t, cs, r.tool, r.args); !isErr || !strings.Contains(msg, r.want) {
			t.Errorf("%s(%v) = %q, want an error about %s", r.tool, r.args, msg, r.want)
		}
	}
	if _, isErr := call(t, cs, "erase_user", map[string]any{"user": "bob", "confirm": "bob"}); isErr {
		t.Fatal("confirmed erasure failed")
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, c := range st.calls {
		if c != "tenant-a/bob" {
			t.Errorf("a service was called for %s", c)
		}
	}
	if len(st.calls) != 3 || len(st.erased) != 1 {
		t.Fatalf("calls %v, erased %v: want list, read and one erase", st.calls, st.erased)
	}
}

func TestParseURI(t *testing.T) {
	tests := []struct {
		uri  string
		user string
		rest string
		ok   bool
	}{
		{"memgate://users/ana/facts", "ana", "facts", true},
		{"memgate://users/ana/conversations/c1/summary", "ana", "conversations/c1/summary", true},
		{"memgate://users/ana", "", "", false},
		{"memgate://users/a%20b/facts", "", "", false},
		{"file:///etc/passwd", "", "", false},
	}
	for _, tt := range tests {
		user, rest, ok := parseURI(tt.uri)
		if ok != tt.ok || user != tt.user || strings.Join(rest, "/") != tt.rest {
			t.Errorf("parseURI(%q) = %q %v %v", tt.uri, user, rest, ok)
		}
	}
}
