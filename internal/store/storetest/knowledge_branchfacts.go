package storetest

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// testSupersededBranchRetractsItsFacts covers the facts of a message a
// client edited inside the history it resends (the save supersedes the
// stored branch from there, SavePlan.SupersedeFrom): the facts only the
// superseded branch stated are retracted in the save's transaction, the
// newest superseded value of a retracted current fact's key (stated by a
// message still live) is current again, a fact a live message also stated
// stays, and a late fact of the superseded message is refused. The same
// holds of a branch a Rewind supersedes (a change the client made past
// the history its requests store).
func testSupersededBranchRetractsItsFacts(t *testing.T, s KnowledgeStore) {
	for _, rewind := range []bool{false, true} {
		t.Run(map[bool]string{false: "in window", true: "rewind"}[rewind], func(t *testing.T) {
			testBranchRetracts(t, s, rewind)
		})
	}
}

func testBranchRetracts(t *testing.T, s KnowledgeStore, rewind bool) {
	ctx := testCtx(t)
	user := "alice-" + strconv.FormatBool(rewind)
	id := memory.Identity{Tenant: "acme", User: user, Conversation: "c1"}
	first := []memory.Message{msg(t, "user", "I lived in Madrid. I am vegan."), msg(t, "assistant", "noted")}
	ex1 := exchange(id, "e1", 1, nil, first[:1], first[1])
	mustSave(t, s, ex1)
	lisbon := msg(t, "user", "I live in Lisbon. I am vegan.")
	ex2 := exchange(id, "e2", 2, slices.Clone(first), []memory.Message{lisbon}, msg(t, "assistant", "ok"))
	mustSave(t, s, ex2)
	keyOf := func(content string) string {
		t.Helper()
		for _, m := range mustRecent(t, s, id, 10) {
			if m.Content == content {
				return m.Key
			}
		}
		t.Fatalf("no live message says %q", content)
		return ""
	}
	said, madrid := keyOf(lisbon.Content), keyOf(first[0].Content)
	stated := func(key, value, source string, n int) memory.Fact {
		f := fact("acme", user, memory.FactProfile, key, value, n)
		f.Source = source
		return f
	}
	mustUpsertFact(t, s, stated("city", "Madrid", madrid, 1), 0)
	mustUpsertFact(t, s, stated("city", "Lisbon", said, 2), 0) // supersedes Madrid
	mustUpsertFact(t, s, stated("diet", "vegan", madrid, 1), 0)
	mustUpsertFact(t, s, stated("diet", "vegan", said, 2), 0) // also stated by a live message
	mustUpsertFact(t, s, stated("drink", "tea", said, 2), 0)

	// The client edits its last message and resends the history.
	porto := msg(t, "user", "I live in Porto.")
	ex3 := exchange(id, "e3", 3, slices.Clone(first), []memory.Message{porto}, msg(t, "assistant", "ok"))
	if rewind {
		var seq int64
		for _, m := range mustRecent(t, s, id, 10) {
			if m.Key == said {
				seq = m.Seq
			}
		}
		st := memory.Stamps(ex2, 2)[0]
		if !st.Known {
			t.Fatal("the statement has no stamp")
		}
		ex3 = exchange(id, "e3", 3, nil, []memory.Message{porto}, msg(t, "assistant", "ok"))
		ex3.Rewind = &memory.Rewind{Seq: seq, Pos: st.Pos, Digest: st.Digest}
	}
	res, err := s.SaveExchange(ctx, ex3)
	if err != nil {
		t.Fatal(err)
	}
	if res.Superseded != 2 {
		t.Fatalf("the edit superseded %d messages, want 2 (the old turn and its reply)", res.Superseded)
	}
	values := func(history bool) []string {
		t.Helper()
		fs, err := s.Facts(ctx, "acme", user, baseTime.Add(time.Hour), history)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range fs {
			out = append(out, f.Key+"="+f.Value)
		}
		slices.Sort(out)
		return out
	}
	if got, want := values(false), []string{"city=Madrid", "diet=vegan"}; !slices.Equal(got, want) {
		t.Fatalf("after the edit the current facts are %q, want %q", got, want)
	}
	if got, want := values(true), []string{"city=Madrid", "diet=vegan"}; !slices.Equal(got, want) {
		t.Fatalf("after the edit the facts' history is %q, want %q (the old branch's facts retracted)", got, want)
	}
	// A late fact of the superseded message is refused.
	late := stated("city", "Lisbon", said, 2)
	late.GuardSince = ex2.At
	if _, err := s.UpsertFact(ctx, late, 0); err == nil {
		t.Fatal("a late fact of the superseded message was written")
	}
	if got, want := values(false), []string{"city=Madrid", "diet=vegan"}; !slices.Equal(got, want) {
		t.Fatalf("after a late fact the current facts are %q, want %q", got, want)
	}
}
