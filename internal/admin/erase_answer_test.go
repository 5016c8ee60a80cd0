package admin

import (
	"context"
	"encoding/json"
	"path/filepath"
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
