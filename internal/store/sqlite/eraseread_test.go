package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

// TestInspectorReadRacingAnErasureAnswersNothing runs each inspector read
// so that its statement reads the user's rows while an erasure is under
// way (after its first chunk) and the read answers only once the erasure
// has ended: the read must answer nothing, since what it read was being
// erased. A check of the erasure made after the read, in a statement of
// its own, finds the erasure over and lets the half-erased rows through.
func TestInspectorReadRacingAnErasureAnswersNothing(t *testing.T) {
	reads := []struct {
		name string
		read func(ctx context.Context, s *sqlite.Store, id memory.Identity) (string, error)
	}{
		{"Footprint", func(ctx context.Context, s *sqlite.Store, id memory.Identity) (string, error) {
			f, err := s.Footprint(ctx, id.Tenant, id.User)
			if f == (memory.Footprint{}) {
				return "", err
			}
			return fmt.Sprintf("%+v", f), err
		}},
		{"Conversations", func(ctx context.Context, s *sqlite.Store, id memory.Identity) (string, error) {
			cs, err := s.Conversations(ctx, id.Tenant, id.User)
			return count(len(cs)), err
		}},
		{"Summaries", func(ctx context.Context, s *sqlite.Store, id memory.Identity) (string, error) {
			ss, err := s.Summaries(ctx, id)
			return count(len(ss)), err
		}},
		{"Branches", func(ctx context.Context, s *sqlite.Store, id memory.Identity) (string, error) {
			bs, err := s.Branches(ctx, id, 0)
			return count(len(bs)), err
		}},
	}
	for _, tc := range reads {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, path := mustTempStore(t)
			// The hooks below are for this DeleteUser's chunks and reads
			// alone: no background round of the store's finishes the
			// erasure alongside it, calling them again.
			sqlite.StopResuming(s)
			db := mustRawDB(t, path)
			id := memory.Identity{Tenant: "tenant-a", User: "alice", Conversation: "c1"}
			// Items in c0 for the first chunk to delete (one), a summary and
			// a superseded branch in c1 for the reads to find.
			storetest.SeedBigUser(t, s, memory.Identity{Tenant: id.Tenant, User: id.User, Conversation: "c0"}, 8, 4)
			m := func(role, text string) memory.Message { return memory.Message{Role: role, Content: text} }
			at := time.Now().Add(-time.Minute)
			for i, ex := range []memory.Exchange{
				{ID: "e1", Turn: []memory.Message{m("user", "question 1")}, Reply: m("assistant", "answer 1")},
				{ID: "e2", Prior: []memory.Message{m("user", "question 1"), m("assistant", "answer 1")},
					Turn: []memory.Message{m("user", "question 2")}, Reply: m("assistant", "answer 2")},
				{ID: "e3", Prior: []memory.Message{m("user", "question 1"), m("assistant", "answer 1")}, // regenerated
					Turn: []memory.Message{m("user", "question 2")}, Reply: m("assistant", "answer 2 again")},
			} {
				ex.Identity, ex.At = id, at.Add(time.Duration(i)*time.Second)
				if _, err := s.SaveExchange(ctx, ex); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.SaveSummary(ctx, memory.Summary{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
				Version: 1, FromSeq: 1, ToSeq: 2, Text: "alice asked about Porto"}); err != nil {
				t.Fatal(err)
			}
			if got, err := tc.read(ctx, s, id); err != nil || got == "" {
				t.Fatalf("before the erasure: %q, %v; the test cannot see what it checks", got, err)
			}

			underWay, ended, readDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
			sqlite.SetEraseChunks(s, func(chunk int) error {
				if chunk == 1 {
					close(underWay)
					select { // the read reads the half-erased rows now
					case <-readDone:
					case <-time.After(time.Minute):
						return fmt.Errorf("the read did not run")
					}
				}
				if pendingErasures(t, db) == 0 {
					close(ended)
				}
				return nil
			})
			hooked := false
			sqlite.SetReadHook(s, func() {
				if hooked {
					return
				}
				hooked = true
				close(readDone)
				select { // it answers once the erasure is over
				case <-ended:
				case <-time.After(time.Minute):
					t.Error("the erasure did not end")
				}
			})
			erased := make(chan error, 1)
			go func() { erased <- s.DeleteUser(ctx, id.Tenant, id.User) }()
			select {
			case <-underWay:
			case err := <-erased:
				t.Fatalf("DeleteUser ended (%v) before its first chunk's hook", err)
			}
			got, err := tc.read(ctx, s, id)
			if err := <-erased; err != nil {
				t.Fatalf("DeleteUser: %v", err)
			}
			if err != nil || got != "" {
				t.Fatalf("%s read while the erasure was under way, answered after it ended = %q, %v; want nothing",
					tc.name, got, err)
			}
		})
	}
}

// count is n as the reads' answer: "" for none.
func count(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}
