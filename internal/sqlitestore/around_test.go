package sqlitestore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestMessagesAroundSeesOtherProcesses keeps asking one Store for the turns
// around a message (it keeps them in memory) while a second Store on the
// same file (another process) changes them: a regeneration that supersedes
// them, then the user's erasure. The first Store's very next answer
// follows each change.
func TestMessagesAroundSeesOtherProcesses(t *testing.T) {
	ctx := context.Background()
	s, path := mustTempStore(t)
	other := mustOpen(t, path)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	at := time.Unix(1_700_000_000, 0)
	save := func(st interface {
		SaveExchange(context.Context, memory.Exchange) (memory.SaveResult, error)
	}, exID string, prior []memory.Message, q, a string) {
		t.Helper()
		at = at.Add(time.Second)
		ex := memory.Exchange{ID: exID, Identity: id, Model: "m", At: at, Prior: prior,
			Turn:  []memory.Message{{Role: "user", Content: q, Raw: []byte(fmt.Sprintf(`{"role":"user","content":%q}`, q))}},
			Reply: memory.Message{Role: "assistant", Content: a, Raw: []byte(fmt.Sprintf(`{"role":"assistant","content":%q}`, a))}}
		if _, err := st.SaveExchange(ctx, ex); err != nil {
			t.Fatalf("save %s: %v", exID, err)
		}
	}
	for n := 1; n <= 3; n++ {
		save(s, fmt.Sprintf("ex%d", n), nil, fmt.Sprintf("question %d", n), fmt.Sprintf("answer %d", n))
	}
	ref := memory.MessageRef{Conversation: "c1", Key: memory.Key("ex1", 1)} // seq 2
	want := func(step string, w ...string) {
		t.Helper()
		for range 2 {
			got, err := s.MessagesAround(ctx, "acme", "alice", []memory.MessageRef{ref}, 1)
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
	want("stored", "1:question 1", "2:answer 1", "3:question 2")
	prior := []memory.Message{
		{Role: "user", Content: "question 1", Raw: []byte(`{"role":"user","content":"question 1"}`)},
		{Role: "assistant", Content: "answer 1", Raw: []byte(`{"role":"assistant","content":"answer 1"}`)},
	}
	save(other, "regen", prior, "question 2 edited", "answer 2 again")
	want("after another process's regeneration", "1:question 1", "2:answer 1")
	if err := other.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	want("after another process's erasure")
}
