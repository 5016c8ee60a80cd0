package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// testFactsAndSummarySeeEveryChange keeps asking one store for a user's
// current facts and a conversation's latest summary (a store may keep them
// in memory) while it, the other store and plain SQL change them: facts
// stated through either store, a contradiction, an edit and a delete in
// SQL, a fact expiring as time passes, summaries through either store, an
// edit in SQL, a deleted conversation and the user's erasure. Every answer
// follows the change before it and is the caller's to change.
func testFactsAndSummarySeeEveryChange(t *testing.T, r Replicas) {
	ctx := testCtx(t)
	s, other := r.Mine, r.Other
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	now := baseTime.Add(time.Hour)
	facts := func(step string, want ...string) {
		t.Helper()
		for range 2 { // the second answer may come from memory
			fs, err := s.Facts(ctx, "acme", "alice", now, false)
			if err != nil {
				t.Fatalf("%s: Facts: %v", step, err)
			}
			assertValues(t, step, fs, want...)
			for i := range fs {
				fs[i].Value += " changed by the caller"
			}
		}
	}
	summary := func(step, want string) {
		t.Helper()
		for range 2 {
			sum, err := s.LatestSummary(ctx, alice)
			switch {
			case want == "" && errors.Is(err, memory.ErrNotFound):
				continue
			case err != nil:
				t.Fatalf("%s: LatestSummary: %v", step, err)
			case sum.Text != want || len(sum.KeyEvents) != 1 || sum.KeyEvents[0] != want+" happened":
				t.Fatalf("%s: LatestSummary = %q %q, want %q", step, sum.Text, sum.KeyEvents, want)
			}
			sum.KeyEvents[0] = "changed by the caller"
		}
	}
	version := 0
	summarise := func(st KnowledgeStore, text string) {
		t.Helper()
		version++
		must(t, st.SaveSummary(ctx, memory.Summary{Tenant: alice.Tenant, User: alice.User, Conversation: alice.Conversation,
			Version: version, FromSeq: 1, ToSeq: int64(version), Text: text, KeyEvents: []string{text + " happened"},
			Tokens: 10, CreatedAt: baseTime}))
	}
	save := func(st Store, exID string) {
		t.Helper()
		ex := memory.Exchange{ID: exID, Identity: alice, Model: "m", At: time.Now(),
			Turn: []memory.Message{{Role: "user", Content: "q " + exID}}, Reply: memory.Message{Role: "assistant", Content: "a " + exID}}
		if _, err := st.SaveExchange(ctx, ex); err != nil {
			t.Fatal(err)
		}
	}

	facts("none")
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 0), 0)
	facts("stated through it", "Lisbon")
	mustUpsertFact(t, other, fact("acme", "alice", memory.FactPreference, "diet", "vegan", 1), 0)
	facts("stated through the other store", "vegan", "Lisbon")
	mustUpsertFact(t, other, fact("acme", "alice", memory.FactProfile, "city", "Porto", 2), 0)
	facts("contradicted through the other store", "Porto", "vegan")
	must(t, r.Exec(ctx, `UPDATE facts SET value = 'vegetarian' WHERE user_id = 'alice' AND value = 'vegan'`))
	facts("edited in SQL", "Porto", "vegetarian")
	expiring := fact("acme", "alice", memory.FactGoal, "trip", "Oslo", 3)
	at := now.Add(time.Minute)
	expiring.ExpiresAt = &at
	mustUpsertFact(t, s, expiring, 0)
	facts("an expiring fact", "Oslo", "Porto", "vegetarian")
	now = now.Add(2 * time.Minute)
	facts("after it expired", "Porto", "vegetarian")
	must(t, r.Exec(ctx, `DELETE FROM facts WHERE user_id = 'alice' AND value = 'Porto'`))
	facts("deleted in SQL", "vegetarian")

	summary("no summary", "")
	save(s, "ex1")
	summarise(s, "first")
	summary("summarised through it", "first")
	summarise(other, "second")
	summary("summarised through the other store", "second")
	must(t, r.Exec(ctx, `UPDATE summaries SET key_events = '["third happened"]', content = 'third' WHERE user_id = 'alice'`))
	summary("edited in SQL", "third")
	must(t, other.DeleteConversation(ctx, alice))
	summary("the other store deleted the conversation", "")
	save(s, "ex2")
	version = 0
	summarise(s, "again")
	summary("summarised again", "again")

	must(t, other.DeleteUser(ctx, "acme", "alice"))
	facts("after the other store's erasure")
	summary("after the other store's erasure", "")
	time.Sleep(time.Millisecond) // writes after the erasure
	mustUpsertFact(t, other, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 0), 0)
	save(other, "ex3")
	version = 0
	summarise(other, "after")
	facts("stated again after the erasure", "Lisbon")
	summary("summarised again after the erasure", "after")
	must(t, s.DeleteUser(ctx, "acme", "alice"))
	facts("after its own erasure")
	summary("after its own erasure", "")
}
