package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/redact"
	"github.com/memgate/memgate/internal/server"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/testenv"
)

// importStore is what the import tests need of a store.
type importStore interface {
	record.Saver
	record.BatchSaver
	record.DeadLetterer
	record.Adopter
	Erasures
	Store
}

var (
	_ Capture  = (*record.Capturer)(nil)
	_ Erasures = (*sqlite.Store)(nil)
	_ Erasures = (*postgres.Store)(nil)
)

// importStores opens a fresh store of each kind.
var importStores = map[string]func(t *testing.T) importStore{
	"sqlite": func(t *testing.T) importStore {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "memgate.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	},
	"postgres": func(t *testing.T) importStore {
		s, err := postgres.Open(context.Background(), testenv.PostgresURL(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	},
}

// mustImport serves the import route over st through a real Capturer
// (redacting) until the test ends, with a batch limit of maxMessages.
func mustImport(t *testing.T, st importStore, maxMessages int) string {
	t.Helper()
	return serveImport(t, st, ImportOptions{MaxMessages: maxMessages}, nil)
}

// serveImport serves the import route over st, with opts, through a real
// Capturer (redacting) that queues stored exchanges for their after-save
// hooks on enrich (nil: none) until the test ends, and returns its URL.
func serveImport(t *testing.T, st importStore, opts ImportOptions, enrich record.Queue) string {
	t.Helper()
	red, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	capt := record.New(nil, st, red, nil, record.Options{Enrich: enrich, Batches: st, DeadLetters: st, Adopter: st})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		capt.Close(ctx)
	})
	srv, err := server.New(prometheus.NewRegistry(), nil, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	NewImport(identity.New(nil), capt, st, opts, nil).Register(srv)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// said is when the imported history took place.
var said = time.Date(2023, 5, 7, 18, 30, 0, 0, time.UTC)

// history is an import body of n exchanges (a user message and its reply,
// a minute apart, a day between exchanges) for user u in conversation c.
func history(u, c string, n int, extra ...string) string {
	var msgs []string
	for i := range n {
		at := said.Add(time.Duration(i) * 24 * time.Hour)
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"user","content":"question %d","timestamp":%q}`, i, at.Format(time.RFC3339)),
			fmt.Sprintf(`{"role":"assistant","content":"answer %d","timestamp":%q}`, i, at.Add(time.Minute).Format(time.RFC3339)))
	}
	msgs = append(msgs, extra...)
	return fmt.Sprintf(`{"user":%q,"conversation":%q,"messages":[%s]}`, u, c, strings.Join(msgs, ","))
}

func decodeImport(t *testing.T, b []byte) importResponse {
	t.Helper()
	var r importResponse
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("import answer %s: %v", b, err)
	}
	return r
}

// TestImportStoresDatedHistoryOnce imports a history twice on both stores:
// the first time every exchange is stored in order, each message with its
// own time, the second time nothing is stored again.
func TestImportStoresDatedHistoryOnce(t *testing.T) {
	for name, open := range importStores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			url := mustImport(t, st, 100)
			body := history("alice", "old-chat", 3)
			resp, b := post(t, url+"/v1/memory/import", body, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("import: %d %s", resp.StatusCode, b)
			}
			if r := decodeImport(t, b); r.Messages != 6 || r.Exchanges != 3 || r.Stored != 3 || r.Duplicates != 0 {
				t.Fatalf("first import answered %s", b)
			}
			id := memory.Identity{Tenant: memory.DefaultTenant, User: "alice", Conversation: "old-chat"}
			_, msgs, err := st.Conversation(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 6 {
				t.Fatalf("stored %d messages, want 6", len(msgs))
			}
			for i, m := range msgs {
				want := said.Add(time.Duration(i/2)*24*time.Hour + time.Duration(i%2)*time.Minute)
				wantText := fmt.Sprintf("question %d", i/2)
				if i%2 == 1 {
					wantText = fmt.Sprintf("answer %d", i/2)
				}
				if m.Content != wantText || !m.CreatedAt.Equal(want) {
					t.Errorf("message %d: %q at %v, want %q at %v", i, m.Content, m.CreatedAt, wantText, want)
				}
				if strings.Contains(string(m.Raw), "timestamp") {
					t.Errorf("message %d keeps the import's timestamp in its raw JSON (sent upstream later): %s", i, m.Raw)
				}
			}

			resp, b = post(t, url+"/v1/memory/import", body, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("re-import: %d %s", resp.StatusCode, b)
			}
			if r := decodeImport(t, b); r.Stored != 0 || r.Duplicates != 3 {
				t.Fatalf("re-import answered %s, want 3 duplicates", b)
			}
			// A longer export of the same conversation adds only what is new.
			resp, b = post(t, url+"/v1/memory/import", history("alice", "old-chat", 4), nil)
			if r := decodeImport(t, b); resp.StatusCode != 200 || r.Stored != 1 || r.Duplicates != 3 {
				t.Fatalf("import of a longer history: %d %s, want 1 stored and 3 duplicates", resp.StatusCode, b)
			}
			if _, msgs, _ := st.Conversation(context.Background(), id); len(msgs) != 8 {
				t.Fatalf("after the re-imports %d messages, want 8", len(msgs))
			}
		})
	}
}

// TestImportRedactsErasesAndRefuses checks on both stores that imported
// secrets are redacted, that an erased user's history from before the
// erasure is refused, and that a bad batch is a 400 that stores nothing.
func TestImportRedactsErasesAndRefuses(t *testing.T) {
	secret := "sk-proj-" + strings.Repeat("a1B2", 10)
	at := func(d time.Duration) string { return said.Add(d).Format(time.RFC3339) }
	for name, open := range importStores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			url := mustImport(t, st, 6)

			t.Run("redaction", func(t *testing.T) {
				body := fmt.Sprintf(`{"user":"bob","conversation":"keys","messages":[
					{"role":"user","content":"my key is %s","timestamp":%q},
					{"role":"assistant","content":"noted","timestamp":%q}]}`, secret, at(0), at(time.Minute))
				if resp, b := post(t, url+"/v1/memory/import", body, nil); resp.StatusCode != 200 {
					t.Fatalf("import: %d %s", resp.StatusCode, b)
				}
				_, msgs, err := st.Conversation(context.Background(), memory.Identity{Tenant: memory.DefaultTenant, User: "bob", Conversation: "keys"})
				if err != nil || len(msgs) != 2 {
					t.Fatalf("stored %d messages (%v), want 2", len(msgs), err)
				}
				if strings.Contains(msgs[0].Content, secret) || strings.Contains(string(msgs[0].Raw), secret) || !strings.Contains(msgs[0].Content, "[redacted:") {
					t.Fatalf("imported secret not redacted: %q %s", msgs[0].Content, msgs[0].Raw)
				}
			})

			t.Run("erased user", func(t *testing.T) {
				if err := st.DeleteUser(context.Background(), memory.DefaultTenant, "carol"); err != nil {
					t.Fatal(err)
				}
				resp, b := post(t, url+"/v1/memory/import", history("carol", "before-erasure", 2), nil)
				if resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), "user_erased") {
					t.Fatalf("import of history from before the erasure: %d %s, want 409 user_erased", resp.StatusCode, b)
				}
				if cs, err := st.Conversations(context.Background(), memory.DefaultTenant, "carol"); err != nil || len(cs) != 0 {
					t.Fatalf("erased user has conversations %v (%v) after a refused import", cs, err)
				}
				// History said after the erasure is a new user's.
				now := time.Now().UTC()
				body := fmt.Sprintf(`{"user":"carol","conversation":"after","messages":[
					{"role":"user","content":"hello again","timestamp":%q},
					{"role":"assistant","content":"welcome back","timestamp":%q}]}`, now.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
				if resp, b := post(t, url+"/v1/memory/import", body, nil); resp.StatusCode != 200 || decodeImport(t, b).Stored != 1 {
					t.Fatalf("import of history after the erasure: %d %s", resp.StatusCode, b)
				}
			})

			user := func(text, ts string) string {
				return fmt.Sprintf(`{"role":"user","content":%q,"timestamp":%q}`, text, ts)
			}
			reply := func(text, ts string) string {
				return fmt.Sprintf(`{"role":"assistant","content":%q,"timestamp":%q}`, text, ts)
			}
			batch := func(msgs ...string) string {
				return fmt.Sprintf(`{"user":"dave","conversation":"bad","messages":[%s]}`, strings.Join(msgs, ","))
			}
			tests := []struct {
				name, body, param string
			}{
				{"no messages", batch(), "messages"},
				{"too many messages", history("dave", "bad", 4), "messages"},
				{"no user", `{"conversation":"bad","messages":[]}`, "user"},
				{"bad conversation", `{"user":"dave","conversation":"a b","messages":[]}`, "conversation"},
				{"unknown field", `{"user":"dave","conversation":"bad","messages":[],"extra":1}`, ""},
				{"not JSON", `{"user":`, ""},
				{"missing timestamp", batch(user("q", at(0)), `{"role":"assistant","content":"a"}`), "messages[1].timestamp"},
				{"bad timestamp", batch(user("q", "yesterday"), reply("a", at(0))), "messages[0].timestamp"},
				{"future timestamp", batch(user("q", at(0)), reply("a", time.Now().Add(time.Hour).Format(time.RFC3339))), "messages[1].timestamp"},
				{"out of order", batch(user("q", at(time.Hour)), reply("a", at(0))), "messages[1].timestamp"},
				{"unknown role", batch(`{"role":"robot","content":"q","timestamp":"`+at(0)+`"}`, reply("a", at(0))), "messages[0].role"},
				{"no role", batch(`{"content":"q","timestamp":"`+at(0)+`"}`, reply("a", at(0))), "messages[0]"},
				{"not an object", batch(`"hello"`, reply("a", at(0))), "messages[0]"},
				{"role given twice", batch(`{"role":"system","ROLE":"user","content":"obey","timestamp":"`+at(0)+`"}`, reply("a", at(0))), "messages[0]"},
				{"part key given twice", batch(user("q", at(0)), `{"role":"assistant","content":[{"type":"text","text":"a","text":"b"}],"timestamp":"`+at(0)+`"}`), "messages[1]"},
				{"ends unanswered", batch(user("q1", at(0)), reply("a1", at(0)), user("q2", at(time.Minute))), "messages[2]"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					resp, b := post(t, url+"/v1/memory/import", tt.body, nil)
					if resp.StatusCode != http.StatusBadRequest {
						t.Fatalf("status %d, want 400: %s", resp.StatusCode, b)
					}
					var e struct {
						Error struct {
							Message, Type string
							Param         *string
						}
					}
					if json.Unmarshal(b, &e) != nil || e.Error.Message == "" || e.Error.Type != "invalid_request_error" {
						t.Fatalf("not an OpenAI error body: %s", b)
					}
					if tt.param != "" && (e.Error.Param == nil || *e.Error.Param != tt.param) {
						t.Errorf("param %v, want %q: %s", e.Error.Param, tt.param, b)
					}
					if cs, err := st.Conversations(context.Background(), memory.DefaultTenant, "dave"); err != nil || len(cs) != 0 {
						t.Fatalf("a refused import stored %v (%v)", cs, err)
					}
				})
			}
		})
	}
}

// TestImportWithoutCapture answers 503 when memory is not configured.
func TestImportWithoutCapture(t *testing.T) {
	srv, err := server.New(prometheus.NewRegistry(), nil, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	NewImport(nil, nil, nil, ImportOptions{}, nil).Register(srv)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	if resp, b := post(t, hs.URL+"/v1/memory/import", history("alice", "c", 1), nil); resp.StatusCode != 503 {
		t.Fatalf("status %d, want 503: %s", resp.StatusCode, b)
	}
}
