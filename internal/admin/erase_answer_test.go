package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// TestDeleteUserSaysWhatWasStored: erasing a user answers, besides the id
// the value named, whether the value was that id or a body value's digest
// and what was stored about the user when the erasure began, so that an
// operator who mistyped a user ("Jon Smith" for "John Smith") sees that
// nothing was stored under it. The unknown user is erased all the same:
// its tombstone refuses a late turn.
func TestDeleteUserSaysWhatWasStored(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memgate.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	john := memory.Identity{Tenant: memory.DefaultTenant, User: memory.BodyUserID("John Smith"), Conversation: "c1"}
	ex := memory.Exchange{ID: "e1", Identity: john, At: time.Now().Add(-time.Minute),
		Turn:  []memory.Message{{Role: "user", Content: "my name is John"}},
		Reply: memory.Message{Role: "assistant", Content: "hello John"}}
	if _, err := st.SaveExchange(ctx, ex); err != nil {
		t.Fatal(err)
	}
	base := mustAdmin(t, New(nil, st, nil, nil, 1<<20, 0, nil))

	type answer struct {
		User    string            `json:"user"`
		Deleted bool              `json:"deleted"`
		NamedBy string            `json:"named_by"`
		Found   *bool             `json:"found"`
		Stored  *memory.Footprint `json:"stored"`
	}
	tests := []struct {
		value, user, namedBy string
		found                bool
		messages             int
	}{
		{"Jon Smith", memory.BodyUserID("Jon Smith"), "digest", false, 0}, // the typo
		{"John Smith", john.User, "digest", true, 2},
		{john.User, john.User, "id", false, 0}, // erased already
		{"alice", "alice", "id", false, 0},
	}
	for _, tc := range tests {
		resp, b := deleteUser(t, base, tc.value)
		var got answer
		if resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil {
			t.Fatalf("DELETE user %q: %d %s", tc.value, resp.StatusCode, b)
		}
		if got.User != tc.user || !got.Deleted || got.NamedBy != tc.namedBy || got.Found == nil || *got.Found != tc.found ||
			got.Stored == nil || got.Stored.Messages != tc.messages || got.Stored.Empty() == tc.found {
			t.Errorf("DELETE user %q = %s; want user %q named by %s, found %v with %d messages",
				tc.value, b, tc.user, tc.namedBy, tc.found, tc.messages)
		}
	}
	// The typo's user is erased: a turn received before is refused.
	typo := memory.Identity{Tenant: memory.DefaultTenant, User: memory.BodyUserID("Jon Smith"), Conversation: "c1"}
	late := ex
	late.ID, late.Identity = "late", typo
	if res, err := st.SaveExchange(ctx, late); err != nil || !res.Dropped {
		t.Fatalf("a late turn of the erased unknown user = %+v, %v; want it dropped", res, err)
	}
}

// queueStore is usersStore whose erasure also purged queued turns of the
// user (EraseUser, as engine.Engine's), or left that purge pending.
type queueStore struct {
	usersStore
	queued  map[string]int
	pending map[string]bool
	erased  []string
}

func (s *queueStore) EraseUser(_ context.Context, _, user string) (memory.QueuePurge, error) {
	s.erased = append(s.erased, user)
	return memory.QueuePurge{Queued: s.queued[user], Pending: s.pending[user]}, nil
}

func (s *queueStore) EraseConversation(_ context.Context, id memory.Identity) (memory.QueuePurge, error) {
	s.erased = append(s.erased, id.User+"/"+id.Conversation)
	if id.Conversation == "never" { // nothing stored of it
		return memory.QueuePurge{Pending: s.pending[id.User]}, fmt.Errorf("delete conversation: %w", memory.ErrNotFound)
	}
	return memory.QueuePurge{Pending: s.pending[id.User]}, nil
}

// TestDeleteNeverStoredConversationWhilePurgePending: deleting a
// conversation the store does not hold, while the queues could not be
// asked (the purge pending), answers 404 not_found, as when the queues
// hold none of it, never "deleted": true; its message says the queues
// could not be asked.
func TestDeleteNeverStoredConversationWhilePurgePending(t *testing.T) {
	st := &queueStore{pending: map[string]bool{"cy": true}}
	base := mustAdmin(t, New(nil, st, nil, nil, 1<<20, 0, nil))
	for user, queues := range map[string]bool{"cy": false, "ana": true} {
		req, _ := http.NewRequest(http.MethodDelete, base+"/v1/memory/conversations/never?user="+user, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || bytes.Contains(b, []byte(`"deleted"`)) ||
			bytes.Contains(b, []byte("could not be asked")) == queues {
			t.Errorf("DELETE %s's conversation never stored (queues answering: %v): %d %s; want 404 not_found", user, queues, resp.StatusCode, b)
		}
	}
}

// TestDeleteUserSaysWhatWasQueued: when the store also purges the user's
// turns still queued (answered, not yet stored), the erasure's answer
// counts them ("queued") and says the purge is done, and a user with
// nothing stored but turns queued was found; when the queues did not take
// the purge, the answer says it is pending and neither counts the turns
// nor says whether any were found; a store that cannot say leaves
// "queued" and "queue_purge" out. A conversation's deletion says the same
// of its purge.
func TestDeleteUserSaysWhatWasQueued(t *testing.T) {
	st := &queueStore{queued: map[string]int{"ana": 2}, pending: map[string]bool{"cy": true}}
	base := mustAdmin(t, New(nil, st, nil, nil, 1<<20, 0, nil))
	type answer struct {
		Found      *bool  `json:"found"`
		Queued     *int   `json:"queued"`
		QueuePurge string `json:"queue_purge"`
	}
	ptr := func(v int) *int { return &v }
	yes, no := true, false
	for _, tc := range []struct {
		user   string
		found  *bool
		queued *int
		purge  string
	}{{"ana", &yes, ptr(2), "done"}, {"bob", &no, ptr(0), "done"}, {"cy", nil, nil, "pending"}} {
		resp, b := deleteUser(t, base, tc.user)
		var got answer
		if resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil || !equalPtr(got.Found, tc.found) ||
			!equalPtr(got.Queued, tc.queued) || got.QueuePurge != tc.purge {
			t.Errorf("DELETE user %q: %d %s; want found %v, queued %v, queue_purge %q", tc.user, resp.StatusCode, b, tc.found, tc.queued, tc.purge)
		}
	}
	for user, purge := range map[string]string{"ana": "done", "cy": "pending"} {
		req, _ := http.NewRequest(http.MethodDelete, base+"/v1/memory/conversations/c1?user="+user, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var got answer
		if resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil || got.QueuePurge != purge {
			t.Errorf("DELETE %s's conversation: %d %s; want queue_purge %q", user, resp.StatusCode, b, purge)
		}
	}
	if want := []string{"ana", "bob", "cy"}; len(st.erased) != 5 || !slices.Equal(st.erased[:3], want) {
		t.Errorf("erased %v, want %v then their conversations", st.erased, want)
	}
	plain := mustAdmin(t, New(nil, &usersStore{}, nil, nil, 1<<20, 0, nil))
	if resp, b := deleteUser(t, plain, "ana"); resp.StatusCode != 200 || bytes.Contains(b, []byte(`"queued"`)) || bytes.Contains(b, []byte(`"queue_purge"`)) {
		t.Errorf("DELETE user without a queue count: %d %s; want no queued or queue_purge member", resp.StatusCode, b)
	}
}

// equalPtr reports whether a and b are both nil or point to equal values.
func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
