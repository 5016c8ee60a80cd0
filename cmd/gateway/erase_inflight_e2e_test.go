package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/testenv"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// recitingUpstream answers a chat the way a model that reads its memory
// block does: a prompt that mentions Porto gets "You live in Porto.", any
// other "Noted.".
func recitingUpstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		reply := "Noted."
		if bytes.Contains(body, []byte("Porto")) {
			reply = "You live in Porto."
		}
		upstreamtest.Chat(upstreamtest.Reply{Content: reply}).ServeHTTP(w, r)
	})
}

// twoGateways runs two `gateway serve` in front of up, sharing a fresh
// PostgreSQL database and Redis key space (the local embedder, generous
// load deadlines), and returns their base URLs and the database's URL.
func twoGateways(t *testing.T, up *upstreamtest.Server) (a, b, pgURL string) {
	t.Helper()
	pgURL = testenv.PostgresURL(t)
	cfg := fmt.Sprintf("memory:\n  load_timeout: 10s\n  embedding_timeout: 10s\n"+
		"store:\n  driver: postgres\n  postgres_url: %q\n  redis_url: %q\n  redis_prefix: %q\n",
		pgURL, testenv.RedisURL(t), testenv.RedisPrefix(t))
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := func() map[string]string {
		return map[string]string{"GATEWAY_CONFIG": path, "GATEWAY_UPSTREAM_BASE_URL": up.URL(), "GATEWAY_EMBEDDINGS_PROVIDER": "local"}
	}
	a, _ = mustServeEnv(t, vars())
	b, _ = mustServeEnv(t, vars())
	return a, b, pgURL
}

// TestErasureDropsTurnsThatReadMemoryBeforeIt: two gateways share one
// PostgreSQL and Redis. Alice said "I live in Porto" through gateway B.
// The operator erases her through gateway A while, on B, a turn of hers
// arrives and is answered from the memory the erasure has not removed yet
// (its prompt holds Porto, so the model says "You live in Porto."). That
// turn arrived after the erasure began but read memory from before it:
// once both calls return, nothing of Porto may be stored for her, however
// the erasure's transaction was held up — waiting for the user's lock
// behind an in-flight write, or in its commit (deferred triggers, the WAL
// flush).
func TestErasureDropsTurnsThatReadMemoryBeforeIt(t *testing.T) {
	cases := []struct {
		name string
		// hold holds A's erasure up on conn and returns its release.
		hold func(t *testing.T, conn *pgx.Conn) func()
	}{
		{"waiting for the user's lock", func(t *testing.T, conn *pgx.Conn) func() {
			// An in-flight write of Alice's (a save, an enrichment round)
			// holds her advisory lock shared, as writers take it.
			tx, err := conn.Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(context.Background(),
				`SELECT pg_advisory_xact_lock_shared(hashtextextended($1 || '/' || $2, 3))`, "default", "alice"); err != nil {
				t.Fatal(err)
			}
			return func() { _ = tx.Rollback(context.Background()) }
		}},
		{"in its commit", func(t *testing.T, conn *pgx.Conn) func() {
			// A deferred trigger on the tombstone runs at the commit, after
			// the erasure's deletes and its erased_at, and waits there
			// while the test holds lock 4242.
			ctx := context.Background()
			for _, sql := range []string{
				`CREATE FUNCTION test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN PERFORM pg_advisory_lock_shared(4242); PERFORM pg_advisory_unlock_shared(4242); RETURN NULL; END $$`,
				`CREATE CONSTRAINT TRIGGER test_slow_commit AFTER INSERT OR UPDATE ON user_tombstones
				DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_slow_commit()`,
				`SELECT pg_advisory_lock(4242)`,
			} {
				if _, err := conn.Exec(ctx, sql); err != nil {
					t.Fatal(err)
				}
			}
			return func() { _, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock(4242)`) }
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := upstreamtest.New(t, recitingUpstream())
			a, b, pgURL := twoGateways(t, up)
			alice := headers("", "alice", "trip")

			if r := chat(t, b, alice, false, user("I live in Porto.")); r.Status != http.StatusOK {
				t.Fatalf("first turn: %d %s", r.Status, r.Body)
			}
			eventually(t, "the first turn indexed", func() bool {
				var out struct{ Data []json.RawMessage }
				apiCall(t, http.MethodPost, a+"/v1/memory/search", nil, map[string]any{"user": "alice", "query": "Porto"}, &out)
				return len(out.Data) > 0
			})

			ctx := context.Background()
			conn, err := pgx.Connect(ctx, pgURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close(ctx) })
			waiters := func() int {
				watch, err := pgx.Connect(ctx, pgURL)
				if err != nil {
					t.Fatal(err)
				}
				defer watch.Close(ctx)
				var n int
				if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			release := tc.hold(t, conn)
			released := false
			defer func() {
				if !released {
					release()
				}
			}()

			erased := make(chan int, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodDelete, a+"/v1/memory/users/alice", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					erased <- 0
					return
				}
				resp.Body.Close()
				erased <- resp.StatusCode
			}()
			eventually(t, "the erasure held up", func() bool { return waiters() > 0 })

			chats := len(up.Requests())
			answered := make(chan chatResult, 1)
			go func() {
				body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": []any{user("Where do I live?")}})
				req, _ := http.NewRequest(http.MethodPost, b+"/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				for k, v := range alice {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					answered <- chatResult{}
					return
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				answered <- chatResult{Status: resp.StatusCode, Body: got}
			}()
			eventually(t, "the turn answered upstream", func() bool { return len(up.Requests()) > chats })
			if p := lastChatPrompt(t, up); !strings.Contains(p, "Porto") {
				t.Fatalf("the turn did not read the memory the erasure was removing; prompt:\n%s", p)
			}
			release()
			released = true

			if code := <-erased; code != http.StatusOK {
				t.Fatalf("DELETE user: %d", code)
			}
			if r := <-answered; r.Status != http.StatusOK || !strings.Contains(string(r.Body), "Porto") {
				t.Fatalf("the turn: %d %s", r.Status, r.Body)
			}
			// The turn is stored (or dropped) before its answer returns.
			var convs struct{ Data []struct{ ID string } }
			if code := apiCall(t, http.MethodGet, a+"/v1/memory/conversations?user=alice", nil, nil, &convs); code != http.StatusOK {
				t.Fatalf("list conversations: %d", code)
			}
			for _, c := range convs.Data {
				var conv struct {
					Messages []struct{ Role, Content string }
				}
				apiCall(t, http.MethodGet, a+"/v1/memory/conversations/"+c.ID+"?user=alice", nil, nil, &conv)
				for _, m := range conv.Messages {
					if strings.Contains(m.Content, "Porto") {
						t.Errorf("after the erasure, conversation %s holds %s: %q", c.ID, m.Role, m.Content)
					}
				}
			}
		})
	}
}

// TestErasureReachesTheOtherGatewaysMemory: two gateways share one
// PostgreSQL and Redis. Gateway B has served Alice — her recent turns, her
// pins, recalled passages and the recalled block kept with a full-history
// client's turn are all in its memory — when gateway A erases her. B's
// next prompts, of either client, carry nothing of hers.
func TestErasureReachesTheOtherGatewaysMemory(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	a, b, _ := twoGateways(t, up)
	secrets := []string{"Porto", "aisle", "passport", "Lello"}
	holds := func(p string) []string {
		var found []string
		for _, s := range secrets {
			if strings.Contains(p, s) {
				found = append(found, s)
			}
		}
		return found
	}
	say := func(conv string, msgs ...map[string]any) string {
		t.Helper()
		if r := chat(t, b, headers("", "alice", conv), false, msgs...); r.Status != http.StatusOK {
			t.Fatalf("chat in %s: %d %s", conv, r.Status, r.Body)
		}
		return lastChatPrompt(t, up)
	}

	say("trip", user("I live in Porto and I prefer aisle seats."))
	say("trip", user("Remind me to renew my passport before the trip."))
	say("trip", user("The bookshop Lello was lovely."))
	// Every turn's enrichment, whichever gateway leased the conversation
	// (a turn the other one claimed waits for its lease): the pins of the
	// first two turns and the third's passage.
	eventually(t, "the pins and the passages", func() bool {
		var facts, found json.RawMessage
		apiCall(t, http.MethodGet, a+"/v1/memory/users/alice/facts", nil, nil, &facts)
		apiCall(t, http.MethodPost, a+"/v1/memory/search", nil, map[string]any{"user": "alice", "query": "bookshop"}, &found)
		return strings.Contains(string(facts), "aisle") && strings.Contains(string(facts), "passport") &&
			strings.Contains(string(found), "Lello")
	})
	// B's memory, warm: the trip's recent turns; the pins, in another
	// conversation; the recalled block a full-history client's question
	// was sent with, kept for it.
	if p := say("trip", user("Anything else?")); len(holds(p)) != len(secrets) {
		t.Fatalf("before the erasure, B's prompt in the trip holds only %v:\n%s", holds(p), p)
	}
	if p := say("other", user("Anything else?")); !strings.Contains(p, "aisle") || !strings.Contains(p, "passport") {
		t.Fatalf("before the erasure, B's prompt lacks the pins:\n%s", p)
	}
	history := []map[string]any{user("Hi."), assistant("ack: Hi."), user("Which bookshop was lovely?")}
	if p := say("work", history...); !strings.Contains(p, "Lello") {
		t.Fatalf("before the erasure, the question recalls nothing of Lello:\n%s", p)
	}
	history = append(history, assistant("ack: Which bookshop was lovely?"), user("Thanks."))
	if p := say("work", history...); !strings.Contains(p, "Lello") {
		t.Fatalf("before the erasure, the resent question lost its recalled block:\n%s", p)
	}

	if code := apiCall(t, http.MethodDelete, a+"/v1/memory/users/alice", nil, nil, nil); code != http.StatusOK {
		t.Fatalf("DELETE user on A: %d", code)
	}
	for _, conv := range []string{"trip", "other"} {
		if p := say(conv, user("Anything else?")); len(holds(p)) > 0 {
			t.Errorf("after the erasure on A, B's prompt in %s holds %v:\n%s", conv, holds(p), p)
		}
	}
	history = append(history, assistant("ack: Thanks."), user("Bye."))
	if p := say("work", history...); len(holds(p)) > 0 {
		t.Errorf("after the erasure on A, B's full-history prompt holds %v:\n%s", holds(p), p)
	}
}
