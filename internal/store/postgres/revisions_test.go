package postgres

import (
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestTailFactSummaryRevisionsFollowWrites checks the counters of
// migration 0021 through ItemRevisions: an insert of a user's message
// moves MessagesAdded (an update or delete Messages, 0011), any write of
// their facts moves Facts and of their summaries Summaries, each for the
// user written and no other counter, a TRUNCATE moves every user's, and an
// erasure moves them and keeps the user's row, so none ever goes back.
func TestTailFactSummaryRevisionsFollowWrites(t *testing.T) {
	s := mustOpen(t)
	ctx := testCtx(t)
	read := func(user string) memory.Revisions {
		t.Helper()
		r, err := s.ItemRevisions(ctx, "acme", user)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := s.pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	type moved struct{ added, changed, facts, summaries bool }
	last := read("alice")
	bob := read("bob")
	step := func(name string, want moved) {
		t.Helper()
		r := read("alice")
		for _, c := range []struct {
			counter    string
			was, is    int64
			shouldMove bool
		}{
			{"MessagesAdded", last.MessagesAdded, r.MessagesAdded, want.added},
			{"Messages", last.Messages, r.Messages, want.changed},
			{"Facts", last.Facts, r.Facts, want.facts},
			{"Summaries", last.Summaries, r.Summaries, want.summaries},
		} {
			switch {
			case c.is < c.was:
				t.Fatalf("%s: %s went back from %d to %d", name, c.counter, c.was, c.is)
			case c.shouldMove && c.is == c.was:
				t.Fatalf("%s: %s stayed at %d", name, c.counter, c.is)
			case !c.shouldMove && c.is != c.was:
				t.Fatalf("%s: %s moved from %d to %d", name, c.counter, c.was, c.is)
			}
		}
		if r.Added != last.Added || r.Changed != last.Changed {
			t.Fatalf("%s: the item counters moved: %+v, was %+v", name, r, last)
		}
		last = r
		if got := read("bob"); got != bob && name != "truncate facts" {
			t.Fatalf("%s: bob's counters moved: %+v, was %+v", name, got, bob)
		}
		bob = read("bob")
	}
	exec(`INSERT INTO conversations (tenant, user_id, id, created_at, updated_at) VALUES ('acme', 'alice', 'c1', now(), now())`)
	exec(`INSERT INTO messages (tenant, user_id, conversation, seq, key, role, content, created_at)
		VALUES ('acme', 'alice', 'c1', 1, 'k1', 'user', 'hi', now()), ('acme', 'alice', 'c1', 2, 'k2', 'assistant', 'hello', now())`)
	step("insert messages", moved{added: true})
	exec(`UPDATE messages SET superseded_at = now() WHERE key = 'k2'`)
	step("supersede a message", moved{changed: true})
	exec(`DELETE FROM messages WHERE key = 'k2'`)
	step("delete a message", moved{changed: true})
	exec(`INSERT INTO facts (tenant, user_id, type, key, norm_key, value) VALUES ('acme', 'alice', 'profile', 'city', 'city', 'Porto')`)
	step("insert a fact", moved{facts: true})
	exec(`UPDATE facts SET mentions = mentions + 1 WHERE user_id = 'alice'`)
	step("update a fact", moved{facts: true})
	exec(`DELETE FROM facts WHERE user_id = 'alice'`)
	step("delete a fact", moved{facts: true})
	exec(`INSERT INTO summaries (tenant, user_id, conversation, version, from_seq, to_seq, content)
		VALUES ('acme', 'alice', 'c1', 1, 1, 1, 'a greeting')`)
	step("insert a summary", moved{summaries: true})
	exec(`UPDATE summaries SET content = 'hi' WHERE user_id = 'alice'`)
	step("update a summary", moved{summaries: true})
	exec(`DELETE FROM summaries WHERE user_id = 'alice'`)
	step("delete a summary", moved{summaries: true})
	exec(`INSERT INTO conversations (tenant, user_id, id, created_at, updated_at) VALUES ('acme', 'bob', 'b1', now(), now())`)
	exec(`INSERT INTO facts (tenant, user_id, type, key, norm_key, value) VALUES ('acme', 'bob', 'profile', 'city', 'city', 'Oslo')`)
	bobBefore := read("bob")
	exec(`TRUNCATE facts CASCADE`)
	if got := read("bob"); got.Facts <= bobBefore.Facts {
		t.Fatalf("truncate: bob's Facts stayed at %d", got.Facts)
	}
	step("truncate facts", moved{facts: true})
	exec(`INSERT INTO facts (tenant, user_id, type, key, norm_key, value) VALUES ('acme', 'alice', 'profile', 'city', 'city', 'Porto')`)
	exec(`INSERT INTO summaries (tenant, user_id, conversation, version, from_seq, to_seq, content)
		VALUES ('acme', 'alice', 'c1', 1, 1, 1, 'a greeting')`)
	step("a fact and a summary", moved{facts: true, summaries: true})
	if err := s.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	step("erasure", moved{changed: true, facts: true, summaries: true})
}
