package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// RunStore runs the store contract suite. open must return a fresh, empty
// store for every call (a new SQLite file, a new PostgreSQL schema or
// database) and register its own cleanup; each subtest opens one.
func RunStore(t *testing.T, open func(t *testing.T) Store) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s Store)
	}{
		{"SaveExchangeStoresTurnThenReply", testSaveStoresTurnThenReply},
		{"MessagesKeepTheirOwnTime", testMessagesKeepTheirOwnTime},
		{"SaveResultHoldsTheStoredMessages", testSaveResultHoldsStored},
		{"DuplicateExchange", testDuplicateExchange},
		{"ResentHistory", testResentHistory},
		{"UnseenHistory", testUnseenHistory},
		{"EditAndRegenerate", testEditAndRegenerate},
		{"Recent", testRecent},
		{"ConversationPages", testConversationPages},
		{"ConversationsOrder", testConversationsOrder},
		{"TenantIsolation", testTenantIsolation},
		{"DeleteConversation", testDeleteConversation},
		{"DeleteUser", testDeleteUser},
		{"RawRoundTrip", testRawRoundTrip},
		{"LongHistoryStoredInOrder", testLongHistoryStoredInOrder},
		{"ConcurrentSaves", testConcurrentSaves},
		{"Ping", func(t *testing.T, s Store) {
			if err := s.Ping(testCtx(t)); err != nil {
				t.Fatalf("Ping: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, open(t))
		})
	}
}

// testMessagesKeepTheirOwnTime stores an exchange whose messages carry
// the times they were said (an import) and one whose messages carry none:
// the first keep theirs, the second get the exchange's time.
func testMessagesKeepTheirOwnTime(t *testing.T, s Store) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "dated"}
	said := time.Date(2023, 5, 7, 18, 30, 0, 0, time.UTC)
	ex := simple(t, id, 1)
	ex.At = said
	ex.Turn[0].CreatedAt = said
	ex.Reply.CreatedAt = said.Add(90 * time.Second)
	mustSave(t, s, ex)
	live := simple(t, id, 2)
	live.At = said.Add(24 * time.Hour)
	mustSave(t, s, live)
	_, msgs := mustConversation(t, s, id)
	want := []time.Time{said, said.Add(90 * time.Second), live.At, live.At}
	if len(msgs) != len(want) {
		t.Fatalf("stored %d messages, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		if !m.CreatedAt.Equal(want[i]) {
			t.Errorf("message %d (%s) CreatedAt = %v, want %v", i, m.Content, m.CreatedAt, want[i])
		}
	}
}

func testSaveStoresTurnThenReply(t *testing.T, s Store) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	ex := simple(t, id, 1)
	res := mustSave(t, s, ex)
	if want := (memory.SaveResult{Inserted: 2}); counts(res) != counts(want) {
		t.Fatalf("SaveExchange = %+v, want %+v", res, want)
	}
	c, msgs := mustConversation(t, s, id)
	assertLiveOrder(t, id, c, msgs)
	assertContents(t, "conversation", msgs, []string{"user:question 1", "assistant:answer 1"})
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Errorf("message %d Seq = %d, want %d", i, m.Seq, i+1)
		}
		if want := memory.Key(ex.ID, i); m.Key != want {
			t.Errorf("message %d Key = %q, want %q", i, m.Key, want)
		}
		if m.CreatedAt.IsZero() {
			t.Errorf("message %d has zero CreatedAt", i)
		}
	}
	if c.CreatedAt.IsZero() || c.UpdatedAt.Before(c.CreatedAt) {
		t.Errorf("conversation times created %v updated %v", c.CreatedAt, c.UpdatedAt)
	}
	cs := mustConversations(t, s, id.Tenant, id.User)
	if len(cs) != 1 || cs[0].ID != id.Conversation || cs[0].MessageCount != 2 {
		t.Fatalf("Conversations = %+v, want one conversation c1 with 2 messages", cs)
	}
}

func testDuplicateExchange(t *testing.T, s Store) {
	tests := []struct {
		name   string
		mutate func(ex *memory.Exchange)
	}{
		{"identical redelivery", func(*memory.Exchange) {}},
		{"same id with another reply", func(ex *memory.Exchange) { ex.Reply = msg(t, "assistant", "a different answer") }},
		{"same id with resent history", func(ex *memory.Exchange) {
			ex.Prior = []memory.Message{msg(t, "user", "never stored"), msg(t, "assistant", "nor this")}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := memory.Identity{Tenant: "acme", User: "alice", Conversation: fmt.Sprintf("dup-%d", i)}
			ex := simple(t, id, 1)
			mustSave(t, s, ex)
			again := ex
			tt.mutate(&again)
			res := mustSave(t, s, again)
			if want := (memory.SaveResult{Duplicate: true}); counts(res) != counts(want) {
				t.Fatalf("second SaveExchange = %+v, want %+v", res, want)
			}
			c, msgs := mustConversation(t, s, id)
			assertLiveOrder(t, id, c, msgs)
			assertContents(t, "after duplicate", msgs, []string{"user:question 1", "assistant:answer 1"})
		})
	}
}

// testResentHistory covers clients that resend their history each turn,
// whole or as a trailing window: only the new turn and reply are stored.
func testResentHistory(t *testing.T, s Store) {
	const turns = 6
	tests := []struct {
		name   string
		window int // how many trailing history messages the client resends; 0 = all
	}{
		{"full history", 0},
		{"window of four", 4},
		{"window of one", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := memory.Identity{Tenant: "acme", User: "alice", Conversation: fmt.Sprintf("resend-%d", tt.window)}
			var history []memory.Message
			var want []string
			for n := 1; n <= turns; n++ {
				prior := history
				if tt.window > 0 && len(prior) > tt.window {
					prior = prior[len(prior)-tt.window:]
				}
				turn := msg(t, "user", fmt.Sprintf("question %d", n))
				reply := msg(t, "assistant", fmt.Sprintf("answer %d", n))
				ex := exchange(id, fmt.Sprintf("resend-%d-%d", tt.window, n), n,
					append([]memory.Message(nil), prior...), []memory.Message{turn}, reply)
				res := mustSave(t, s, ex)
				if want := (memory.SaveResult{Inserted: 2}); counts(res) != counts(want) {
					t.Fatalf("turn %d: SaveExchange = %+v, want %+v", n, res, want)
				}
				history = append(history, turn, reply)
				want = append(want, "user:"+turn.Content, "assistant:"+reply.Content)
			}
			c, msgs := mustConversation(t, s, id)
			assertLiveOrder(t, id, c, msgs)
			if len(msgs) != 2*turns {
				t.Fatalf("stored %d messages after %d resent turns, want %d", len(msgs), turns, 2*turns)
			}
			assertContents(t, "conversation", msgs, want)
		})
	}
}

// testUnseenHistory covers a client whose history the gateway never saw: it
// is stored before the turn, with keys continuing the exchange's numbering.
func testUnseenHistory(t *testing.T, s Store) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "imported"}
	prior := []memory.Message{msg(t, "user", "earlier question"), msg(t, "assistant", "earlier answer")}
	ex := exchange(id, "imported-1", 1, prior,
		[]memory.Message{msg(t, "user", "question 1")}, msg(t, "assistant", "answer 1"))
	res := mustSave(t, s, ex)
	if want := (memory.SaveResult{Inserted: 4}); counts(res) != counts(want) {
		t.Fatalf("SaveExchange = %+v, want %+v", res, want)
	}
	c, msgs := mustConversation(t, s, id)
	assertLiveOrder(t, id, c, msgs)
	assertContents(t, "conversation", msgs, []string{
		"user:earlier question", "assistant:earlier answer", "user:question 1", "assistant:answer 1",
	})
	for i, m := range msgs {
		if want := memory.Key(ex.ID, i); m.Key != want {
			t.Errorf("message %d Key = %q, want %q", i, m.Key, want)
		}
	}

	// The same client's next turn resends everything: only the new pair is stored.
	next := exchange(id, "imported-2", 2, msgs, []memory.Message{msg(t, "user", "question 2")}, msg(t, "assistant", "answer 2"))
	if res := mustSave(t, s, next); counts(res) != counts(memory.SaveResult{Inserted: 2}) {
		t.Fatalf("next SaveExchange = %+v, want 2 inserted", res)
	}
	if got := mustRecent(t, s, id, 100); len(got) != 6 {
		t.Fatalf("Recent = %d messages, want 6", len(got))
	}
}

// testEditAndRegenerate covers clients that edit or regenerate an earlier
// turn: the old branch leaves the live view, the new branch is stored, and
// later turns continue from the new branch.
func testEditAndRegenerate(t *testing.T, s Store) {
	u := func(n string) memory.Message { return msg(t, "user", "question "+n) }
	a := func(n string) memory.Message { return msg(t, "assistant", "answer "+n) }
	tests := []struct {
		name       string
		prior      []memory.Message
		turn       memory.Message
		reply      memory.Message
		superseded int
		inserted   int
		live       []string
	}{
		{
			name:  "regenerate last reply",
			prior: []memory.Message{u("1"), a("1"), u("2"), a("2")},
			turn:  u("3"), reply: a("3 regenerated"),
			superseded: 2, inserted: 2,
			live: []string{"user:question 1", "assistant:answer 1", "user:question 2", "assistant:answer 2", "user:question 3", "assistant:answer 3 regenerated"},
		},
		{
			name:  "edit last question",
			prior: []memory.Message{u("1"), a("1"), u("2"), a("2")},
			turn:  u("3 edited"), reply: a("3 edited"),
			superseded: 2, inserted: 2,
			live: []string{"user:question 1", "assistant:answer 1", "user:question 2", "assistant:answer 2", "user:question 3 edited", "assistant:answer 3 edited"},
		},
		{
			name:  "edit an earlier question",
			prior: []memory.Message{u("1"), a("1"), u("2 edited"), a("2 edited")},
			turn:  u("4"), reply: a("4"),
			superseded: 4, inserted: 4,
			live: []string{"user:question 1", "assistant:answer 1", "user:question 2 edited", "assistant:answer 2 edited", "user:question 4", "assistant:answer 4"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := memory.Identity{Tenant: "acme", User: "alice", Conversation: fmt.Sprintf("branch-%d", i)}
			var history []memory.Message
			for n := 1; n <= 3; n++ {
				ex := exchange(id, fmt.Sprintf("branch-%d-%d", i, n), n, append([]memory.Message(nil), history...),
					[]memory.Message{u(fmt.Sprint(n))}, a(fmt.Sprint(n)))
				mustSave(t, s, ex)
				history = append(history, ex.Turn[0], ex.Reply)
			}
			_, before := mustConversation(t, s, id)
			maxSeq := before[len(before)-1].Seq

			ex := exchange(id, fmt.Sprintf("branch-%d-edit", i), 10, tt.prior, []memory.Message{tt.turn}, tt.reply)
			res := mustSave(t, s, ex)
			if want := (memory.SaveResult{Inserted: tt.inserted, Superseded: tt.superseded}); counts(res) != counts(want) {
				t.Fatalf("SaveExchange = %+v, want %+v", res, want)
			}
			c, msgs := mustConversation(t, s, id)
			assertLiveOrder(t, id, c, msgs)
			assertContents(t, "live branch", msgs, tt.live)
			for _, m := range msgs[len(msgs)-tt.inserted:] {
				if m.Seq <= maxSeq {
					t.Errorf("new branch message Seq %d does not continue after %d", m.Seq, maxSeq)
				}
			}
			assertContents(t, "Recent", mustRecent(t, s, id, 100), tt.live)

			// The next full-history turn continues the new branch.
			next := exchange(id, fmt.Sprintf("branch-%d-next", i), 11, msgs, []memory.Message{u("next")}, a("next"))
			if res := mustSave(t, s, next); counts(res) != counts(memory.SaveResult{Inserted: 2}) {
				t.Fatalf("turn after the edit: SaveExchange = %+v, want 2 inserted, 0 superseded", res)
			}
			_, after := mustConversation(t, s, id)
			assertContents(t, "after next turn", after, append(append([]string(nil), tt.live...), "user:question next", "assistant:answer next"))
		})
	}
}

func testRecent(t *testing.T, s Store) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "recent"}
	var all []string
	for n := 1; n <= 5; n++ {
		mustSave(t, s, simple(t, id, n))
		all = append(all, fmt.Sprintf("user:question %d", n), fmt.Sprintf("assistant:answer %d", n))
	}
	tests := []struct {
		name string
		id   memory.Identity
		n    int
		want []string
	}{
		{"newest three", id, 3, all[7:]},
		{"exactly all", id, 10, all},
		{"more than stored", id, 100, all},
		{"zero", id, 0, nil},
		{"unknown conversation", memory.Identity{Tenant: "acme", User: "alice", Conversation: "nope"}, 10, nil},
		{"same conversation id, other user", memory.Identity{Tenant: "acme", User: "bob", Conversation: "recent"}, 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustRecent(t, s, tt.id, tt.n)
			assertContents(t, "Recent", got, tt.want)
			for i := 1; i < len(got); i++ {
				if got[i].Seq <= got[i-1].Seq {
					t.Fatalf("Recent not in Seq order: %d then %d", got[i-1].Seq, got[i].Seq)
				}
			}
		})
	}
}

func testConversationsOrder(t *testing.T, s Store) {
	at := func(conv string) memory.Identity {
		return memory.Identity{Tenant: "acme", User: "alice", Conversation: conv}
	}
	mustSave(t, s, simple(t, at("c1"), 1))
	mustSave(t, s, simple(t, at("c2"), 2))
	mustSave(t, s, simple(t, at("c3"), 3))
	mustSave(t, s, simple(t, at("c1"), 4))
	mustSave(t, s, simple(t, memory.Identity{Tenant: "acme", User: "bob", Conversation: "c9"}, 5))

	cs := mustConversations(t, s, "acme", "alice")
	var got []string
	for _, c := range cs {
		got = append(got, fmt.Sprintf("%s/%s/%s:%d", c.Tenant, c.User, c.ID, c.MessageCount))
	}
	want := []string{"acme/alice/c1:4", "acme/alice/c3:2", "acme/alice/c2:2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Conversations = %v, want %v (most recently updated first)", got, want)
	}
	if cs := mustConversations(t, s, "acme", "nobody"); len(cs) != 0 {
		t.Fatalf("Conversations of an unknown user = %+v, want none", cs)
	}
}

// testTenantIsolation stores the same user and conversation ids, even the
// same exchange ids, under two tenants (and a second user of one tenant), and
// checks that no read or delete crosses between them.
func testTenantIsolation(t *testing.T, s Store) {
	a := memory.Identity{Tenant: "tenant-a", User: "alice", Conversation: "c1"}
	b := memory.Identity{Tenant: "tenant-b", User: "alice", Conversation: "c1"}
	bob := memory.Identity{Tenant: "tenant-a", User: "bob", Conversation: "c1"}
	for _, x := range []struct {
		id   memory.Identity
		exID string
	}{{a, "shared-request-id"}, {b, "shared-request-id"}, {bob, "bob-request-id"}} {
		ex := exchange(x.id, x.exID, 1, nil,
			[]memory.Message{msg(t, "user", "secret of "+x.id.Tenant+"/"+x.id.User)},
			msg(t, "assistant", "noted for "+x.id.Tenant+"/"+x.id.User))
		if res := mustSave(t, s, ex); counts(res) != counts(memory.SaveResult{Inserted: 2}) {
			t.Fatalf("SaveExchange for %+v = %+v, want 2 inserted (exchange ids must not collide across tenants)", x.id, res)
		}
	}
	own := func(id memory.Identity) []string {
		return []string{"user:secret of " + id.Tenant + "/" + id.User, "assistant:noted for " + id.Tenant + "/" + id.User}
	}
	check := func(t *testing.T, id memory.Identity) {
		t.Helper()
		c, msgs := mustConversation(t, s, id)
		assertLiveOrder(t, id, c, msgs)
		assertContents(t, "Conversation", msgs, own(id))
		assertContents(t, "Recent", mustRecent(t, s, id, 10), own(id))
		cs := mustConversations(t, s, id.Tenant, id.User)
		if len(cs) != 1 || cs[0].Tenant != id.Tenant || cs[0].User != id.User || cs[0].ID != id.Conversation {
			t.Fatalf("Conversations(%s, %s) = %+v, want only its own c1", id.Tenant, id.User, cs)
		}
	}
	for _, id := range []memory.Identity{a, b, bob} {
		check(t, id)
	}
	if cs := mustConversations(t, s, "tenant-c", "alice"); len(cs) != 0 {
		t.Fatalf("Conversations in an unused tenant = %+v, want none", cs)
	}

	if err := s.DeleteConversation(testCtx(t), a); err != nil {
		t.Fatalf("DeleteConversation(a): %v", err)
	}
	assertNotFound(t, s, a)
	check(t, b)
	check(t, bob)
}

func testDeleteConversation(t *testing.T, s Store) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "doomed"}
	sibling := memory.Identity{Tenant: "acme", User: "alice", Conversation: "kept"}
	mustSave(t, s, simple(t, id, 1))
	mustSave(t, s, simple(t, id, 2))
	mustSave(t, s, simple(t, sibling, 3))

	if err := s.DeleteConversation(testCtx(t), id); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	tests := []struct {
		name string
		id   memory.Identity
	}{
		{"deleted twice", id},
		{"unknown id", memory.Identity{Tenant: "acme", User: "alice", Conversation: "never"}},
		{"other user's id", memory.Identity{Tenant: "acme", User: "mallory", Conversation: "kept"}},
		{"other tenant's id", memory.Identity{Tenant: "evil", User: "alice", Conversation: "kept"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.DeleteConversation(testCtx(t), tt.id); !errors.Is(err, memory.ErrNotFound) {
				t.Fatalf("DeleteConversation = %v, want memory.ErrNotFound", err)
			}
		})
	}
	assertNotFound(t, s, id)
	if got := mustRecent(t, s, id, 10); len(got) != 0 {
		t.Fatalf("Recent after delete = %d messages, want none", len(got))
	}
	cs := mustConversations(t, s, "acme", "alice")
	if len(cs) != 1 || cs[0].ID != "kept" {
		t.Fatalf("Conversations after delete = %+v, want only kept", cs)
	}
	_, kept := mustConversation(t, s, sibling)
	assertContents(t, "sibling", kept, []string{"user:question 3", "assistant:answer 3"})

	// The id can be used again and starts empty.
	mustSave(t, s, simple(t, id, 7))
	_, again := mustConversation(t, s, id)
	assertContents(t, "reused id", again, []string{"user:question 7", "assistant:answer 7"})
}

func testDeleteUser(t *testing.T, s Store) {
	alice1 := memory.Identity{Tenant: "tenant-a", User: "alice", Conversation: "c1"}
	alice2 := memory.Identity{Tenant: "tenant-a", User: "alice", Conversation: "c2"}
	otherTenant := memory.Identity{Tenant: "tenant-b", User: "alice", Conversation: "c1"}
	bob := memory.Identity{Tenant: "tenant-a", User: "bob", Conversation: "c1"}
	for i, id := range []memory.Identity{alice1, alice2, otherTenant, bob} {
		mustSave(t, s, simple(t, id, i+1))
	}
	if err := s.DeleteUser(testCtx(t), "tenant-a", "alice"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	if cs := mustConversations(t, s, "tenant-a", "alice"); len(cs) != 0 {
		t.Fatalf("Conversations after DeleteUser = %+v, want none", cs)
	}
	for _, id := range []memory.Identity{alice1, alice2} {
		assertNotFound(t, s, id)
		if got := mustRecent(t, s, id, 10); len(got) != 0 {
			t.Fatalf("Recent(%+v) after DeleteUser = %d messages", id, len(got))
		}
	}
	for _, id := range []memory.Identity{otherTenant, bob} {
		c, msgs := mustConversation(t, s, id)
		assertLiveOrder(t, id, c, msgs)
		if len(msgs) != 2 {
			t.Fatalf("%+v lost messages in another user's erasure: %d left", id, len(msgs))
		}
	}

	tests := []struct {
		name    string
		tenant  string
		user    string
		at      time.Time
		dropped bool
	}{
		{"captured before the erasure", "tenant-a", "alice", time.Now().Add(-time.Hour), true},
		{"captured long before the erasure", "tenant-a", "alice", baseTime, true},
		{"captured after the erasure", "tenant-a", "alice", time.Now().Add(time.Hour), false},
		{"erased user with nothing stored yet", "tenant-a", "carol", time.Now().Add(-time.Hour), true},
		{"same user id in another tenant", "tenant-b", "alice", time.Now().Add(-time.Hour), false},
	}
	if err := s.DeleteUser(testCtx(t), "tenant-a", "carol"); err != nil {
		t.Fatalf("DeleteUser of a user with nothing stored: %v", err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := memory.Identity{Tenant: tt.tenant, User: tt.user, Conversation: fmt.Sprintf("late-%d", i)}
			ex := simple(t, id, 20+i)
			ex.At = tt.at
			res, err := s.SaveExchange(testCtx(t), ex)
			if err != nil {
				t.Fatalf("SaveExchange: %v", err)
			}
			if tt.dropped {
				if want := (memory.SaveResult{Dropped: true}); counts(res) != counts(want) {
					t.Fatalf("SaveExchange = %+v, want %+v", res, want)
				}
				assertNotFound(t, s, id)
				return
			}
			if want := (memory.SaveResult{Inserted: 2}); counts(res) != counts(want) {
				t.Fatalf("SaveExchange = %+v, want %+v", res, want)
			}
			_, msgs := mustConversation(t, s, id)
			if len(msgs) != 2 {
				t.Fatalf("stored %d messages, want 2", len(msgs))
			}
		})
	}
}

// testRawRoundTrip stores content parts, tool calls and a tool result and
// checks that each message comes back JSON-equal, with its text and tokens.
func testRawRoundTrip(t *testing.T, s Store) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "raw"}
	user := rawMsg(t, `{"role":"user","content":[{"type":"text","text":"what is in this image?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png","detail":"low"}}],"name":"alice"}`)
	call := rawMsg(t, `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"cat\",\"n\":2}"}}]}`)
	result := rawMsg(t, `{"role":"tool","tool_call_id":"call_1","content":"a cat \u00e9 \"quoted\" ✓"}`)
	answer := rawMsg(t, `{"role":"assistant","content":"It is a cat — ünïcode ✓\nline two","refusal":null}`)

	mustSave(t, s, exchange(id, "raw-1", 1, nil, []memory.Message{user}, call))
	if res := mustSave(t, s, exchange(id, "raw-2", 2, []memory.Message{user, call}, []memory.Message{result}, answer)); counts(res) != counts(memory.SaveResult{Inserted: 2}) {
		t.Fatalf("tool result exchange = %+v, want 2 inserted", res)
	}
	want := []memory.Message{user, call, result, answer}
	_, convMsgs := mustConversation(t, s, id)
	for _, src := range []struct {
		name string
		msgs []memory.Message
	}{{"Conversation", convMsgs}, {"Recent", mustRecent(t, s, id, 10)}} {
		t.Run(src.name, func(t *testing.T) {
			if len(src.msgs) != len(want) {
				t.Fatalf("%d messages, want %d", len(src.msgs), len(want))
			}
			for i, m := range src.msgs {
				if m.Role != want[i].Role || m.Content != want[i].Content || m.Tokens != want[i].Tokens {
					t.Errorf("message %d = %s %q (%d tokens), want %s %q (%d tokens)",
						i, m.Role, m.Content, m.Tokens, want[i].Role, want[i].Content, want[i].Tokens)
				}
				if !jsonEqual(t, m.Raw, want[i].Raw) {
					t.Errorf("message %d Raw = %s\nwant %s", i, m.Raw, want[i].Raw)
				}
			}
		})
	}
}

// testConcurrentSaves stores distinct exchanges into one conversation from
// several goroutines: every message is stored, Seq is unique and gap-free,
// and each exchange's turn and reply are adjacent.
func testConcurrentSaves(t *testing.T, s Store) {
	const workers, each = 6, 8
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "busy"}
	errs := make(chan error, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				n := w*each + j
				ex := exchange(id, fmt.Sprintf("w%d-%d", w, j), n, nil,
					[]memory.Message{msg(t, "user", fmt.Sprintf("q %d", n))}, msg(t, "assistant", fmt.Sprintf("a %d", n)))
				res, err := s.SaveExchange(testCtx(t), ex)
				if err == nil && counts(res) != counts(memory.SaveResult{Inserted: 2}) {
					err = fmt.Errorf("exchange %s: result %+v, want 2 inserted", ex.ID, res)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	c, msgs := mustConversation(t, s, id)
	assertLiveOrder(t, id, c, msgs)
	if len(msgs) != 2*workers*each {
		t.Fatalf("stored %d messages, want %d", len(msgs), 2*workers*each)
	}
	keys := map[string]int64{}
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Fatalf("message %d has Seq %d: seqs must be 1..%d without gaps", i, m.Seq, len(msgs))
		}
		keys[m.Key] = m.Seq
	}
	for w := range workers {
		for j := range each {
			exID := fmt.Sprintf("w%d-%d", w, j)
			turn, okT := keys[memory.Key(exID, 0)]
			reply, okR := keys[memory.Key(exID, 1)]
			if !okT || !okR || reply != turn+1 {
				t.Fatalf("exchange %s: turn seq %d (%v), reply seq %d (%v); want adjacent", exID, turn, okT, reply, okR)
			}
		}
	}
}

// testSaveResultHoldsStored checks SaveResult.Stored is what Recent reads
// back (mustSave compares them), for times finer than a store keeps, in
// another zone, a message without Raw, and history the store had not seen
// stored along with the turn.
func testSaveResultHoldsStored(t *testing.T, s Store) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "stored"}
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	ex := exchange(id, "first", 1, nil, []memory.Message{msg(t, "user", "question 1")}, msg(t, "assistant", "answer 1"))
	ex.At = ex.At.Add(123456789 * time.Nanosecond).In(zone)
	ex.Turn[0].Raw = nil
	if res := mustSave(t, s, ex); res.Inserted != 2 {
		t.Fatalf("first save: %+v", res)
	}
	// The client resends history holding a turn never stored: it is stored
	// before the new turn.
	unseen := msg(t, "user", "said elsewhere")
	unseen.CreatedAt = baseTime.Add(1500 * time.Millisecond).Add(987 * time.Nanosecond)
	ex = exchange(id, "second", 2, []memory.Message{msg(t, "user", "question 1"), msg(t, "assistant", "answer 1"), unseen},
		[]memory.Message{msg(t, "user", "question 2")}, msg(t, "assistant", "answer 2"))
	if res := mustSave(t, s, ex); res.Inserted != 3 {
		t.Fatalf("second save: %+v", res)
	}
}

// testConversationPages: pages after a seq and before one walk the live
// branch in Seq order, each message once, superseded ones left out, and
// say how many live messages the conversation holds.
func testConversationPages(t *testing.T, s Store) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "pages"}
	var history []memory.Message
	for n := 1; n <= 4; n++ {
		ex := exchange(id, fmt.Sprintf("pages-%d", n), n, append([]memory.Message(nil), history...),
			[]memory.Message{msg(t, "user", fmt.Sprintf("question %d", n))}, msg(t, "assistant", fmt.Sprintf("answer %d", n)))
		mustSave(t, s, ex)
		history = append(history, ex.Turn[0], ex.Reply)
	}
	// Regenerate the last answer: seqs 7 and 8 leave the live branch.
	mustSave(t, s, exchange(id, "pages-regen", 5, history[:6], []memory.Message{msg(t, "user", "question 4")}, msg(t, "assistant", "answer 4 again")))
	_, live := mustConversation(t, s, id)
	if len(live) != 8 {
		t.Fatalf("%d live messages, want 8", len(live))
	}
	page := func(p memory.Page) []memory.Message {
		t.Helper()
		c, msgs, err := s.ConversationPage(testCtx(t), id, p)
		if err != nil {
			t.Fatalf("ConversationPage(%+v): %v", p, err)
		}
		if c.ID != id.Conversation || c.MessageCount != len(live) {
			t.Fatalf("ConversationPage(%+v): conversation %+v, want %s with %d messages", p, c, id.Conversation, len(live))
		}
		return msgs
	}
	var forward, backward []memory.Message
	for after := int64(0); ; {
		got := page(memory.Page{After: after, Limit: 3})
		if len(got) == 0 {
			break
		}
		forward = append(forward, got...)
		after = got[len(got)-1].Seq
	}
	for before := live[len(live)-1].Seq + 1; ; {
		got := page(memory.Page{Before: before, Backward: true, Limit: 3})
		if len(got) == 0 {
			break
		}
		backward = append(got, backward...)
		before = got[0].Seq
	}
	for name, got := range map[string][]memory.Message{"after": forward, "before": backward, "no limit": page(memory.Page{})} {
		if len(got) != len(live) {
			t.Fatalf("paging %s: %d messages, want %d", name, len(got), len(live))
		}
		for i := range got {
			if got[i].Seq != live[i].Seq || got[i].Content != live[i].Content {
				t.Fatalf("paging %s: message %d is #%d %q, want #%d %q", name, i, got[i].Seq, got[i].Content, live[i].Seq, live[i].Content)
			}
		}
	}
	// The page before the first message, or before seq 0, is empty: a walk
	// backward ends there instead of starting again from the first page.
	for _, before := range []int64{0, live[0].Seq} {
		if got := page(memory.Page{Before: before, Backward: true, Limit: 3}); len(got) != 0 {
			t.Fatalf("page before #%d: %d messages from #%d, want none", before, len(got), got[0].Seq)
		}
	}
	if got := page(memory.Page{After: live[5].Seq, Limit: 1}); len(got) != 1 || got[0].Seq != live[6].Seq || got[0].Seq == live[5].Seq+1 {
		t.Fatalf("page after #%d skips the superseded messages: got %+v", live[5].Seq, got)
	}
	if _, _, err := s.ConversationPage(testCtx(t), memory.Identity{Tenant: "acme", User: "bob", Conversation: "pages"}, memory.Page{Limit: 3}); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("another user's page: %v, want ErrNotFound", err)
	}
}
