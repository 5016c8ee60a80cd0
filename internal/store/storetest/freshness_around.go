package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// aroundStore is a store that reads the turns around recalled messages.
type aroundStore interface {
	MessagesAround(ctx context.Context, rev *memory.Revisions, tenant, user string, refs []memory.MessageRef, radius int) ([]*memory.Message, error)
}

// messagesAround returns s.MessagesAround's messages, copied: the store's
// own are shared, never to be written into.
func messagesAround(ctx context.Context, s aroundStore, tenant, user string, refs []memory.MessageRef, radius int) ([]memory.Message, error) {
	shared, err := s.MessagesAround(ctx, nil, tenant, user, refs, radius)
	if err != nil {
		return nil, err
	}
	out := make([]memory.Message, len(shared))
	for i, m := range shared {
		out[i] = *m
	}
	return out, nil
}

// testMessagesAroundSeesEveryChange keeps asking one store for the turns
// around a message (a store may keep them in memory) while the other store
// and plain SQL change them: a regeneration that supersedes some, an edit
// of a turn's text, the user's erasure, and the same exchanges stored
// again after it. Every answer follows the change before it.
func testMessagesAroundSeesEveryChange(t *testing.T, r Replicas) {
	ctx := testCtx(t)
	s, ok := r.Mine.(aroundStore)
	if !ok {
		t.Fatalf("%T has no MessagesAround", r.Mine)
	}
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	at := time.Now().Add(-time.Hour)
	msg := func(role, text string) memory.Message {
		return memory.Message{Role: role, Content: text, Raw: []byte(fmt.Sprintf(`{"role":%q,"content":%q}`, role, text))}
	}
	save := func(st Store, exID string, prior []memory.Message, q, a string) {
		t.Helper()
		at = at.Add(time.Second)
		ex := memory.Exchange{ID: exID, Identity: id, Model: "m", At: at, Prior: prior,
			Turn: []memory.Message{msg("user", q)}, Reply: msg("assistant", a)}
		if res, err := st.SaveExchange(ctx, ex); err != nil || res.Dropped || res.Duplicate {
			t.Fatalf("save %s: %+v, %v", exID, res, err)
		}
	}
	ref := memory.MessageRef{Conversation: "c1", Key: memory.Key("ex1", 1)} // seq 2
	want := func(step string, w ...string) {
		t.Helper()
		for range 2 { // the second answer may come from memory
			got, err := messagesAround(ctx, s, "acme", "alice", []memory.MessageRef{ref}, 1)
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			var out []string
			for _, m := range got {
				out = append(out, fmt.Sprintf("%d:%s", m.Seq, m.Content))
			}
			if !slices.Equal(out, w) {
				t.Fatalf("%s: MessagesAround = %q, want %q", step, out, w)
			}
		}
	}
	for n := 1; n <= 3; n++ {
		save(r.Mine, fmt.Sprintf("ex%d", n), nil, fmt.Sprintf("question %d", n), fmt.Sprintf("answer %d", n))
	}
	want("stored", "1:question 1", "2:answer 1", "3:question 2")
	save(r.Other, "regen", []memory.Message{msg("user", "question 1"), msg("assistant", "answer 1")},
		"question 2 edited", "answer 2 again")
	want("after the other store's regeneration", "1:question 1", "2:answer 1")
	must(t, r.Exec(ctx, `UPDATE messages SET content = 'answer one' WHERE tenant = 'acme' AND user_id = 'alice' AND key = '`+ref.Key+`'`))
	want("after an edit in SQL", "1:question 1", "2:answer one")
	must(t, r.Other.DeleteUser(ctx, "acme", "alice"))
	want("after the other store's erasure")
	// The same exchanges again, after the erasure: the same keys and seqs,
	// other texts.
	at = time.Now().Add(time.Minute)
	for n := 1; n <= 2; n++ {
		save(r.Other, fmt.Sprintf("ex%d", n), nil, fmt.Sprintf("new question %d", n), fmt.Sprintf("new answer %d", n))
	}
	want("stored again after the erasure", "1:new question 1", "2:new answer 1", "3:new question 2")
}
