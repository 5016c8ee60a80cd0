package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/memgate/memgate/internal/admin"
	"github.com/memgate/memgate/internal/memory"
)

// longStore holds one conversation of n messages, seqs 1 to n.
type longStore struct {
	fakeStore
	n int
}

func (s *longStore) all() []memory.Message {
	msgs := make([]memory.Message, s.n)
	for i := range msgs {
		msgs[i] = memory.Message{Seq: int64(i + 1), Role: "user", Content: "m"}
	}
	return msgs
}

func (s *longStore) Conversation(context.Context, memory.Identity) (memory.Conversation, []memory.Message, error) {
	return memory.Conversation{ID: "c", MessageCount: s.n}, s.all(), nil
}

func (s *longStore) ConversationPage(_ context.Context, _ memory.Identity, p memory.Page) (memory.Conversation, []memory.Message, error) {
	var page []memory.Message
	for _, m := range s.all() {
		if (p.Backward && m.Seq < p.Before) || (!p.Backward && m.Seq > p.After) {
			page = append(page, m)
		}
	}
	if p.Limit > 0 && len(page) > p.Limit {
		if p.Backward {
			page = page[len(page)-p.Limit:]
		} else {
			page = page[:p.Limit]
		}
	}
	return memory.Conversation{ID: "c", MessageCount: s.n}, page, nil
}

// TestReadConversationIsPaged: read_conversation answers a page of the
// messages (admin.DefaultPageMessages without a limit) with the cursors
// of the management API. Before, it read the conversation whole.
func TestReadConversationIsPaged(t *testing.T) {
	svc := New(Deps{Store: &longStore{n: 250}}, Options{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	cs := connect(t, svc.Server("tenant-a"))
	read := func(args map[string]any) (n int, first, last int64, more bool) {
		t.Helper()
		args["user"], args["conversation"] = "bob", "c"
		text, isErr := call(t, cs, "read_conversation", args)
		if isErr {
			t.Fatalf("read_conversation %v: %s", args, text)
		}
		var a struct {
			Messages []message `json:"messages"`
			FirstID  int64     `json:"first_id"`
			LastID   int64     `json:"last_id"`
			HasMore  bool      `json:"has_more"`
		}
		if err := json.Unmarshal([]byte(text), &a); err != nil {
			t.Fatal(err)
		}
		return len(a.Messages), a.FirstID, a.LastID, a.HasMore
	}
	if n, first, last, more := read(map[string]any{}); n != admin.DefaultPageMessages || first != 1 || last != 100 || !more {
		t.Fatalf("first page: %d messages #%d-#%d, has_more %v", n, first, last, more)
	}
	if n, first, last, more := read(map[string]any{"after": 200, "limit": 1000}); n != 50 || first != 201 || last != 250 || more {
		t.Fatalf("last page: %d messages #%d-#%d, has_more %v", n, first, last, more)
	}
	if n, first, _, more := read(map[string]any{"before": 11, "limit": 5}); n != 5 || first != 6 || !more {
		t.Fatalf("page before #11: %d messages from #%d, has_more %v", n, first, more)
	}
	// An LLM fills optional integers with 0: before 0 and after 0 are not
	// given (the management API's before=0 is an empty page).
	for _, args := range []map[string]any{{"before": 0}, {"after": 0, "before": 0}, {"after": 0}} {
		if n, first, last, more := read(args); n != admin.DefaultPageMessages || first != 1 || last != 100 || !more {
			t.Fatalf("%v: %d messages #%d-#%d, has_more %v; want the first page", args, n, first, last, more)
		}
	}
	if n, first, last, more := read(map[string]any{"after": 200, "before": 0}); n != 50 || first != 201 || last != 250 || more {
		t.Fatalf("after 200, before 0: %d messages #%d-#%d, has_more %v; want the last 50", n, first, last, more)
	}
	if n, _, _, more := read(map[string]any{"before": 1}); n != 0 || more {
		t.Fatalf("page before #1: %d messages, has_more %v; want none, false", n, more)
	}
	for _, args := range []map[string]any{{"limit": 1001}, {"after": 1, "before": 5}, {"after": -1}, {"before": -1}} {
		args["user"], args["conversation"] = "bob", "c"
		if text, isErr := call(t, cs, "read_conversation", args); !isErr {
			t.Errorf("%v: %s, want refused", args, text)
		}
	}
}
