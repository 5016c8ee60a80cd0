package storetest

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// testEditRetractsItsFacts covers the facts of a message a client edited
// deep in a long chat (memory.Edit with its new Text): the save that
// supersedes the old text retracts, in its transaction, the facts only the
// old text stated — the current one and a superseded one alike, with
// their recall items, gone from the facts' history too — and the newest
// superseded value of a retracted current fact's key (stated by a message
// still live) is current again. A fact another live message also stated,
// or one the API also stated, stays. The new text is live: a fact stated
// in it (as enrichment records one, guarded, at the new text's time, the
// old text's) is written, and supersedes the reopened value.
func testEditRetractsItsFacts(t *testing.T, s KnowledgeStore) {
	ctx := testCtx(t)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	history := []memory.Message{msg(t, "user", "I lived in Madrid and I am vegan."), msg(t, "assistant", "noted")}
	statement := msg(t, "user", "I live in Lisbon. I am vegan. I drink tea.")
	ex1 := exchange(id, "e1", 1, history, []memory.Message{statement}, msg(t, "assistant", "ok"))
	mustSave(t, s, ex1)
	stamps := memory.Stamps(ex1, 4)
	var seq int64
	for _, m := range mustRecent(t, s, id, 10) {
		if m.Key == memory.Key("e1", 2) {
			seq = m.Seq
		}
	}
	if seq == 0 || !stamps[2].Known {
		t.Fatalf("the statement is not stored at e1:2 with a stamp (seq %d, stamp %+v)", seq, stamps[2])
	}
	// Facts as enrichment states them: each from its message.
	stated := func(key, value, source string, n int) memory.Fact {
		f := fact("acme", "alice", memory.FactProfile, key, value, n)
		f.Source = source
		return f
	}
	first, said := memory.Key("e1", 0), memory.Key("e1", 2)
	mustUpsertFact(t, s, stated("city", "Madrid", first, 1), 0)
	lisbon := mustUpsertFact(t, s, stated("city", "Lisbon", said, 2), 0) // supersedes Madrid
	mustAddItems(t, s, item(id, "fact", strconv.FormatInt(lisbon.ID, 10), "profile city: Lisbon", vec4(1, 0, 0, 0)))
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(1, 0, 0, 0), Model: testModel, Dims: 4, Text: "Lisbon", Limit: 10}
	if got := mustSearchText(t, s, q); len(got) != 1 {
		t.Fatalf("the fact's item is found %d times, want once", len(got))
	}
	mustUpsertFact(t, s, stated("diet", "vegan", first, 1), 0)
	mustUpsertFact(t, s, stated("diet", "vegan", said, 2), 0) // also stated by a live message
	mustUpsertFact(t, s, stated("drink", "tea", said, 2), 0)
	api := fact("acme", "alice", memory.FactProfile, "drink", "tea", 3)
	api.Conversation = ""
	mustUpsertFact(t, s, api, 0) // also stated through the API
	mustUpsertFact(t, s, stated("pet", "cat", said, 2), 0)
	dog := stated("pet", "dog", said, 2)
	dog.Rule = "pet" // another rule: a statement of its own
	if got := mustUpsertFact(t, s, dog, 0); got.Value != "dog" {
		t.Fatalf("pet is %q, want dog (cat, the old text's too, superseded)", got.Value)
	}

	// The client edits the statement where its requests no longer store it.
	rewritten := msg(t, "user", "I live in Porto. I drink tea.")
	ex2 := exchange(id, "e2", 10, append(slices.Clone(history), rewritten, msg(t, "assistant", "ok")),
		[]memory.Message{msg(t, "user", "what now?")}, msg(t, "assistant", "anything"))
	ex2.Edits = []memory.Edit{{Seq: seq, Pos: stamps[2].Pos, Digest: stamps[2].Digest, Amend: memory.Digest{1},
		Supersede: true, Text: &rewritten}}
	res, err := s.SaveExchange(ctx, ex2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Revised) != 1 || res.Superseded != 1 {
		t.Fatalf("the edit revised %d messages, superseded %d; want one each", len(res.Revised), res.Superseded)
	}
	values := func(history bool) []string {
		t.Helper()
		fs, err := s.Facts(ctx, "acme", "alice", baseTime.Add(time.Hour), history)
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
	if got, want := values(false), []string{"city=Madrid", "diet=vegan", "drink=tea"}; !slices.Equal(got, want) {
		t.Fatalf("after the edit the current facts are %q, want %q", got, want)
	}
	if got, want := values(true), []string{"city=Madrid", "diet=vegan", "drink=tea"}; !slices.Equal(got, want) {
		t.Fatalf("after the edit the facts' history is %q, want %q (the old text's facts retracted)", got, want)
	}
	if got := mustSearchText(t, s, q); len(got) != 0 {
		t.Fatalf("the retracted fact's item is still found: %q", refs(got))
	}
	// Enrichment of the new text states Porto in it, when the old text
	// was said: it is written, and is the user's city.
	porto := stated("city", "Porto", res.Revised[0].Key, 0)
	porto.CreatedAt, porto.UpdatedAt, porto.GuardSince = res.Revised[0].CreatedAt, res.Revised[0].CreatedAt, ex2.At
	if got := mustUpsertFact(t, s, porto, 0); got.Value != "Porto" || got.SupersededAt != nil {
		t.Fatalf("the new text's fact is %+v, want Porto current", got)
	}
	if got, want := values(false), []string{"city=Porto", "diet=vegan", "drink=tea"}; !slices.Equal(got, want) {
		t.Fatalf("after the new text's enrichment the current facts are %q, want %q", got, want)
	}
	// A late fact of the old text is refused.
	late := stated("city", "Lisbon", said, 2)
	late.GuardSince = ex1.At
	if _, err := s.UpsertFact(ctx, late, 0); err == nil {
		t.Fatal("a late fact of the old text was written")
	}
}
