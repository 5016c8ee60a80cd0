package admin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// usersStore records the users the conversation routes ask for.
type usersStore struct {
	mu    sync.Mutex
	users []string
}

func (s *usersStore) saw(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users = append(s.users, user)
}

func (s *usersStore) Conversations(_ context.Context, _, user string) ([]memory.Conversation, error) {
	s.saw(user)
	return nil, nil
}

func (s *usersStore) Conversation(_ context.Context, id memory.Identity) (memory.Conversation, []memory.Message, error) {
	s.saw(id.User)
	return memory.Conversation{}, nil, memory.ErrNotFound
}

func (s *usersStore) ConversationPage(ctx context.Context, id memory.Identity, _ memory.Page) (memory.Conversation, []memory.Message, error) {
	return s.Conversation(ctx, id)
}

func (s *usersStore) DeleteConversation(_ context.Context, id memory.Identity) error {
	s.saw(id.User)
	return nil
}

func (s *usersStore) DeleteUser(_ context.Context, _, user string) error {
	s.saw(user)
	return nil
}

func (s *usersStore) Footprint(context.Context, string, string) (memory.Footprint, error) {
	return memory.Footprint{}, nil
}

// TestAdminNamesBodyUsersByTheirValue: an app that names its users in the
// body's user field with values that are not ids ("John Smith") has them
// stored as memory.BodyUserID's digests; the management API takes the
// value the app sent wherever it takes a user — in the path, escaped, or
// the query — and acts on that digest, which its answer names, so an
// operator can list and erase such a user without computing it. An id is
// itself.
func TestAdminNamesBodyUsersByTheirValue(t *testing.T) {
	st := &usersStore{}
	base := mustAdmin(t, New(nil, st, nil, nil, 1<<20, 0, nil))
	for _, value := range []string{"John Smith", "{3F2504E0-4F89-11D3-9A0C-0305E82C3301}", "aGk/+w==", "a%41 b", "x/%41", "alice"} {
		want := memory.BodyUserID(value)
		st.users = nil
		resp, b := deleteUser(t, base, value)
		var got struct {
			User    string `json:"user"`
			Deleted bool   `json:"deleted"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &got) != nil || got.User != want || !got.Deleted {
			t.Errorf("DELETE user %q: %d %s, want user %q erased", value, resp.StatusCode, b, want)
		}
		resp, err := http.Get(base + "/v1/memory/conversations?user=" + url.QueryEscape(value))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET conversations of %q: %d", value, resp.StatusCode)
		}
		if len(st.users) != 2 || st.users[0] != want || st.users[1] != want {
			t.Errorf("user %q: the store was asked for %q, want %q", value, st.users, want)
		}
	}
}

// deleteUser asks the management API at base to erase the user value
// names, escaped in the path.
func deleteUser(t *testing.T, base, value string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, base+"/v1/memory/users/"+url.PathEscape(value), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

// TestAdminRefusesABlankUser: a blank user value names no user on the chat
// routes (memory.BodyUserID), so the management API refuses it as it does
// an empty one, without asking the store.
func TestAdminRefusesABlankUser(t *testing.T) {
	st := &usersStore{}
	base := mustAdmin(t, New(nil, st, nil, nil, 1<<20, 0, nil))
	for _, value := range []string{" ", "\t"} {
		resp, b := deleteUser(t, base, value)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("DELETE user %q: %d %s, want 400", value, resp.StatusCode, b)
		}
		resp, err := http.Get(base + "/v1/memory/conversations?user=" + url.QueryEscape(value))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET conversations of %q: %d, want 400", value, resp.StatusCode)
		}
	}
	if len(st.users) != 0 {
		t.Errorf("the store was asked for %q", st.users)
	}
}

// nameRecall is a Recall whose methods the test never reaches: the user is
// refused first.
type nameRecall struct{ Recall }

// TestAdminBlankUserSaysWhere: the 400 for a missing or blank user says
// where the route takes it — the query parameter, the path, or the body's
// user member — so a caller of POST /v1/memory/search is not sent looking
// for a query parameter the route does not read.
func TestAdminBlankUserSaysWhere(t *testing.T) {
	base := mustAdmin(t, New(nil, &usersStore{}, nameRecall{}, nil, 1<<20, 0, nil))
	get := func(path string) (*http.Response, []byte) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	tests := []struct {
		name  string
		call  func() (*http.Response, []byte)
		where string
	}{
		{"conversations without user", func() (*http.Response, []byte) { return get("/v1/memory/conversations") }, "query parameter"},
		{"facts of a blank user", func() (*http.Response, []byte) { return get("/v1/memory/users/%20/facts") }, "path"},
		{"erase a blank user", func() (*http.Response, []byte) { return deleteUser(t, base, " ") }, "path"},
		{"search without user", func() (*http.Response, []byte) {
			return post(t, base+"/v1/memory/search", `{"query":"x"}`, map[string]string{"Content-Type": "application/json"})
		}, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := tt.call()
			var e struct {
				Error struct{ Message, Param string } `json:"error"`
			}
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Error.Param != "user" {
				t.Fatalf("%d %s, want a 400 naming user", resp.StatusCode, b)
			}
			if !strings.Contains(e.Error.Message, tt.where) {
				t.Errorf("message %q does not say the user goes in the %s", e.Error.Message, tt.where)
			}
		})
	}
}
