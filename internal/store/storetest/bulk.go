package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// bulkMessages is how many messages the bulk cases store at once: more
// than a store writes or checks in one statement (a few hundred at most),
// and not a multiple of any round batch size.
const bulkMessages = 1_103

// bulkHistory returns n messages alternating user and assistant, each
// with its own text and raw JSON, the i-th said at baseTime plus i
// seconds.
func bulkHistory(tb testing.TB, n int) []memory.Message {
	tb.Helper()
	msgs := make([]memory.Message, n)
	for i := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs[i] = msg(tb, role, fmt.Sprintf("message %d: é\u00a0ü %s", i, string(rune('a'+i%26))))
		msgs[i].CreatedAt = baseTime.Add(time.Duration(i) * time.Second)
	}
	return msgs
}

// testLongHistoryStoredInOrder: a first capture that resends a long
// history stores every message once, in order: keys memory.Key(ex.ID, i),
// Seq from 1, each with its own role, content, raw JSON and time, the
// turn and the reply last; the exchange redelivered stores nothing more.
func testLongHistoryStoredInOrder(t *testing.T, s Store) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "long"}
	hist := bulkHistory(t, bulkMessages)
	ex := exchange(id, "ex-long", 1, hist[:len(hist)-2], hist[len(hist)-2:len(hist)-1], hist[len(hist)-1])
	res := mustSave(t, s, ex)
	if res.Inserted != len(hist) || len(res.Stored) != len(hist) {
		t.Fatalf("the save inserted %d (%d returned), want %d", res.Inserted, len(res.Stored), len(hist))
	}
	_, got, err := s.Conversation(testCtx(t), id)
	if err != nil {
		t.Fatalf("Conversation: %v", err)
	}
	if len(got) != len(hist) {
		t.Fatalf("Conversation holds %d messages, want %d", len(got), len(hist))
	}
	for i, m := range got {
		w := hist[i]
		if m.Seq != int64(i+1) || m.Key != memory.Key(ex.ID, i) || m.Role != w.Role || m.Content != w.Content ||
			!m.CreatedAt.Equal(w.CreatedAt) || !jsonEqual(t, m.Raw, w.Raw) {
			t.Fatalf("message %d = seq %d key %s %s %q at %v raw %s, want seq %d key %s %s %q at %v raw %s", i,
				m.Seq, m.Key, m.Role, m.Content, m.CreatedAt, m.Raw, i+1, memory.Key(ex.ID, i), w.Role, w.Content, w.CreatedAt, w.Raw)
		}
		if r := res.Stored[i]; r.Key != m.Key || r.Seq != m.Seq || r.Content != m.Content {
			t.Fatalf("SaveResult.Stored[%d] = %s seq %d %q, want %s seq %d %q", i, r.Key, r.Seq, r.Content, m.Key, m.Seq, m.Content)
		}
	}
	if again := mustSave(t, s, ex); !again.Duplicate || again.Inserted != 0 {
		t.Fatalf("the redelivered exchange: %+v, want a duplicate", again)
	}
	if _, got, _ := s.Conversation(testCtx(t), id); len(got) != len(hist) {
		t.Fatalf("after the redelivery the conversation holds %d messages, want %d", len(got), len(hist))
	}
}

// testAddItemsInBulk: AddItems of many message items at once, the
// indexer's writes of a long history, places each as one at a time would
// (contract.ItemChecks): an item of a message its conversation has since
// superseded is left out, one of the default conversation whose message
// now lives in another conversation is written there, the rest where
// they say (but a guarded one of a message never stored, left out);
// written in one transaction (no guard) or in the background ones of
// guarded writes alike.
func testAddItemsInBulk(t *testing.T, s KnowledgeStore) {
	for _, guarded := range []bool{false, true} {
		user := fmt.Sprint("bulk-", guarded)
		long := memory.Identity{Tenant: "acme", User: user, Conversation: "long"}
		def := memory.Identity{Tenant: "acme", User: user, Conversation: memory.DefaultConversation}
		elsewhere := memory.Identity{Tenant: "acme", User: user, Conversation: "elsewhere"}

		hist := bulkHistory(t, bulkMessages)
		first := exchange(long, "ex-long", 1, hist[:len(hist)-2], hist[len(hist)-2:len(hist)-1], hist[len(hist)-1])
		mustSave(t, s, first)
		// A regeneration keeps the first keep messages: the rest (and
		// their keys) leave the live branch.
		const keep = 1_060 // within contract.AlignSlack of the end
		regen := exchange(long, "ex-regen", 2, hist[:keep], []memory.Message{msg(t, "user", "another question")},
			msg(t, "assistant", "another answer"))
		if res := mustSave(t, s, regen); res.Superseded != len(hist)-keep {
			t.Fatalf("the regeneration superseded %d, want %d", res.Superseded, len(hist)-keep)
		}
		// Messages of another conversation, indexed as the default
		// conversation's (as an exchange adopted before its late index),
		// and messages of the default conversation itself.
		moved := exchange(elsewhere, "ex-moved", 3, bulkHistory(t, 600), []memory.Message{msg(t, "user", "q")}, msg(t, "assistant", "a"))
		mustSave(t, s, moved)
		home := exchange(def, "ex-home", 4, bulkHistory(t, 40), []memory.Message{msg(t, "user", "q")}, msg(t, "assistant", "a"))
		mustSave(t, s, home)

		want := map[string]string{} // ref -> conversation it is stored in ("": left out)
		var items []memory.Item
		add := func(id memory.Identity, key, in string) {
			it := item(id, "message", key, "bulk item "+key, nil)
			if guarded {
				it.GuardSince = baseTime
			}
			items = append(items, it)
			want[key] = in
		}
		for i := range len(hist) {
			in := long.Conversation
			if i >= keep {
				in = ""
			}
			add(long, memory.Key(first.ID, i), in)
		}
		for i := range keep + 2 {
			// The regeneration stored two messages alone (the rest are
			// the first exchange's), keys 0 and 1: a guarded item of a
			// key never stored is left out.
			in := long.Conversation
			if guarded && i >= 2 {
				in = ""
			}
			add(long, memory.Key(regen.ID, i), in)
		}
		for i := range 602 {
			add(def, memory.Key(moved.ID, i), elsewhere.Conversation)
		}
		for i := range 42 {
			add(def, memory.Key(home.ID, i), def.Conversation)
		}
		// No message: an unguarded item stays where it says, a guarded
		// one (the hooks', late) is left out.
		if guarded {
			add(def, "ex-nowhere:0", "")
		} else {
			add(def, "ex-nowhere:0", def.Conversation)
		}
		// The indexer's order is not the messages': shuffle it.
		items = shuffled(items)
		mustAddItems(t, s, items...)

		got := map[string]string{}
		all, err := s.ItemsToEmbed(testCtx(t), "another-model", 4, 0, 100_000)
		if err != nil {
			t.Fatalf("ItemsToEmbed: %v", err)
		}
		for _, it := range all {
			if it.User == user {
				if prev, twice := got[it.Ref]; twice {
					t.Fatalf("item %s stored twice (%s, %s)", it.Ref, prev, it.Conversation)
				}
				got[it.Ref] = it.Conversation
			}
		}
		for ref, in := range want {
			if g, ok := got[ref]; in == "" && ok {
				t.Fatalf("guarded %v: item %s of a message not live stored in %q", guarded, ref, g)
			} else if in != "" && g != in {
				t.Fatalf("guarded %v: item %s stored in %q (found %v), want %q", guarded, ref, g, ok, in)
			}
		}
		for ref := range got {
			if _, ok := want[ref]; !ok {
				t.Fatalf("guarded %v: unexpected item %s", guarded, ref)
			}
		}
	}
}

// shuffled returns items in a fixed order unlike theirs: every seventh
// first, then the rest reversed.
func shuffled(items []memory.Item) []memory.Item {
	var head, tail []memory.Item
	for i, it := range items {
		if i%7 == 0 {
			head = append(head, it)
		} else {
			tail = append(tail, it)
		}
	}
	slices.Reverse(tail)
	return append(head, tail...)
}
