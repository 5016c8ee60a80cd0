package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// KnowledgeStore is a store adapter that implements both the conversation
// contract and the Knowledge contract; RunKnowledge needs both, because
// summaries belong to stored conversations and DeleteUser must erase facts
// and items.
type KnowledgeStore interface {
	Store
	Knowledge
}

// RunKnowledge runs the Knowledge contract suite. open must return a fresh,
// empty store for every call and register its own cleanup; each subtest
// opens one.
func RunKnowledge(t *testing.T, open func(t *testing.T) KnowledgeStore) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s KnowledgeStore)
	}{
		{"MessagesAfter", testMessagesAfter},
		{"SummaryRoundTrip", testSummaryRoundTrip},
		{"SummaryVersions", testSummaryVersions},
		{"SummaryTenantIsolation", testSummaryTenantIsolation},
		{"FactSameValue", testFactSameValue},
		{"FactContradiction", testFactContradiction},
		{"FactStatedEarlierDoesNotSupersede", testFactStatedEarlier},
		{"FactNormalisedKey", testFactNormalisedKey},
		{"FactPinnedSticky", testFactPinnedSticky},
		{"FactRuleAndSource", testFactRuleAndSource},
		{"FactRestatedFromItsMessage", testFactRestatedFromItsMessage},
		{"DeleteConversationForgetsItsMentions", testDeleteConversationForgetsItsMentions},
		{"FactCapPerUser", testFactCapPerUser},
		{"FactExpiry", testFactExpiry},
		{"FactOrder", testFactOrder},
		{"DeleteFact", testDeleteFact},
		{"FactTenantIsolation", testFactTenantIsolation},
		{"FactItemsFollowTheirFact", testFactItemsFollowTheirFact},
		{"AddItemsIdempotent", testAddItemsIdempotent},
		{"AddItemsInBulk", testAddItemsInBulk},
		{"SearchVectorRanksByCosine", testSearchVectorRanks},
		{"SearchVectorScope", testSearchVectorScope},
		{"SearchesReturnEmbeddings", testSearchesReturnEmbeddings},
		{"SearchVector384", testSearchVector384},
		{"SearchVector384Isolation", testSearchVector384Isolation},
		{"SearchTextRanks", testSearchTextRanks},
		{"SearchTextScope", testSearchTextScope},
		{"SearchTextHostileQueries", testSearchTextHostile},
		{"ItemsToEmbedResumable", testItemsToEmbed},
		{"DeleteUserErasesKnowledge", testDeleteUserErasesKnowledge},
		{"ReindexAfterErasure", testReindexAfterErasure},
		{"DeleteConversationErasesItems", testDeleteConversationErasesItems},
		{"DeleteConversationDeletesItsFacts", testDeleteConversationDeletesItsFacts},
		{"LateWritesOfDeletedConversation", testLateWritesOfDeletedConversation},
		{"LateIndexOfRecreatedConversation", testLateIndexOfRecreatedConversation},
		{"LateKnowledgeOfRecreatedConversation", testLateKnowledgeOfRecreatedConversation},
		{"GuardedWritesRaceConversationDelete", testGuardedWritesRaceConversationDelete},
		{"DeleteConversationRacesIndexing", testDeleteConversationRacesIndexing},
		{"SupersededItemsLeaveSearch", testSupersededItemsLeaveSearch},
		{"EditRetractsItsFacts", testEditRetractsItsFacts},
		{"SupersededBranchRetractsItsFacts", testSupersededBranchRetractsItsFacts},
		{"FirstMessageEditSupersedes", testFirstMessageEdit},
		{"SupersessionDropsItsSummaries", testSupersessionDropsItsSummaries},
		{"LateSummaryOfSupersededBranch", testLateSummaryOfSupersededBranch},
		{"LateIndexRacesSupersession", testLateIndexRacesSupersession},
		{"EmbedItemsNeverWritesAgain", testEmbedItemsNeverWritesAgain},
		{"IndexBacklog", testIndexBacklog},
		{"IndexBacklogFollowsItsMessages", testIndexBacklogFollowsItsMessages},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, open(t))
		})
	}
}

// testMessagesAfter covers MessagesAfter: live messages only, Seq > afterSeq,
// oldest first, at most limit, scoped to the conversation's user and tenant.
func testMessagesAfter(t *testing.T, s KnowledgeStore) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	for n := 1; n <= 3; n++ {
		mustSave(t, s, simple(t, id, n))
	}
	// Regenerating the third reply supersedes seq 5 and 6 and stores 7 and 8.
	prior := []memory.Message{
		msg(t, "user", "question 1"), msg(t, "assistant", "answer 1"),
		msg(t, "user", "question 2"), msg(t, "assistant", "answer 2"),
	}
	mustSave(t, s, exchange(id, "regen", 4, prior,
		[]memory.Message{msg(t, "user", "question 3")}, msg(t, "assistant", "answer 3 again")))
	// Same conversation id under another user and another tenant.
	mustSave(t, s, simple(t, memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}, 9))
	mustSave(t, s, simple(t, memory.Identity{Tenant: "other", User: "alice", Conversation: "c1"}, 9))

	tests := []struct {
		name     string
		id       memory.Identity
		afterSeq int64
		limit    int
		want     []string
		seqs     []int64
	}{
		{"all live", id, 0, 100, []string{"user:question 1", "assistant:answer 1", "user:question 2", "assistant:answer 2", "user:question 3", "assistant:answer 3 again"}, []int64{1, 2, 3, 4, 7, 8}},
		{"after seq 2", id, 2, 100, []string{"user:question 2", "assistant:answer 2", "user:question 3", "assistant:answer 3 again"}, []int64{3, 4, 7, 8}},
		{"limit keeps the oldest", id, 2, 3, []string{"user:question 2", "assistant:answer 2", "user:question 3"}, []int64{3, 4, 7}},
		{"after a superseded seq", id, 5, 100, []string{"user:question 3", "assistant:answer 3 again"}, []int64{7, 8}},
		{"after the end", id, 8, 100, nil, nil},
		{"unknown conversation", memory.Identity{Tenant: "acme", User: "alice", Conversation: "nope"}, 0, 100, nil, nil},
		{"other tenant", memory.Identity{Tenant: "other", User: "alice", Conversation: "c1"}, 0, 100, []string{"user:question 9", "assistant:answer 9"}, []int64{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.MessagesAfter(testCtx(t), tt.id, tt.afterSeq, tt.limit)
			if err != nil {
				t.Fatalf("MessagesAfter: %v", err)
			}
			assertContents(t, "MessagesAfter", got, tt.want)
			for i, m := range got {
				if m.Seq != tt.seqs[i] {
					t.Errorf("message %d Seq = %d, want %d", i, m.Seq, tt.seqs[i])
				}
				if m.Tenant != tt.id.Tenant || m.User != tt.id.User || m.Conversation != tt.id.Conversation {
					t.Errorf("message %d identity = %s/%s/%s, want %+v", i, m.Tenant, m.User, m.Conversation, tt.id)
				}
				if m.Key == "" || len(m.Raw) == 0 || m.Tokens == 0 || m.CreatedAt.IsZero() {
					t.Errorf("message %d incomplete: %+v", i, m)
				}
			}
		})
	}
}

// summary builds version v of a conversation's summary covering 1..toSeq.
func summary(id memory.Identity, v int, toSeq int64) memory.Summary {
	return memory.Summary{
		Tenant:        id.Tenant,
		User:          id.User,
		Conversation:  id.Conversation,
		Version:       v,
		FromSeq:       1,
		ToSeq:         toSeq,
		Text:          fmt.Sprintf("summary version %d", v),
		KeyEvents:     []string{fmt.Sprintf("event %d", v)},
		Preserved:     memory.Preserved{Numbers: []string{"R$ 5.000"}, Dates: []string{"2025-12-01"}, Decisions: []string{"save monthly"}},
		Tokens:        10 * v,
		CoveredTokens: 100 * v,
		CreatedAt:     baseTime.Add(time.Duration(v) * time.Minute),
	}
}

// mustLatestSummary loads the newest summary, which must exist.
func mustLatestSummary(tb testing.TB, s Knowledge, id memory.Identity) memory.Summary {
	tb.Helper()
	got, err := s.LatestSummary(testCtx(tb), id)
	if err != nil {
		tb.Fatalf("LatestSummary(%+v): %v", id, err)
	}
	return got
}

// assertSummary compares every field of a summary.
func assertSummary(tb testing.TB, got, want memory.Summary) {
	tb.Helper()
	if !got.CreatedAt.Equal(want.CreatedAt) {
		tb.Errorf("CreatedAt = %v, want %v", got.CreatedAt, want.CreatedAt)
	}
	got.CreatedAt, want.CreatedAt = time.Time{}, time.Time{}
	// What only checks a write is never stored.
	want.GuardSince, want.Through, want.Covers = time.Time{}, "", nil
	if !reflect.DeepEqual(got, want) {
		tb.Fatalf("summary:\n got %+v\nwant %+v", got, want)
	}
}

func testSummaryRoundTrip(t *testing.T, s KnowledgeStore) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	mustSave(t, s, simple(t, id, 1))
	if _, err := s.LatestSummary(testCtx(t), id); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("LatestSummary before any = %v, want memory.ErrNotFound", err)
	}
	want := memory.Summary{
		Tenant:       id.Tenant,
		User:         id.User,
		Conversation: id.Conversation,
		Version:      1,
		FromSeq:      3,
		ToSeq:        41,
		Text:         "Alice is saving \"R$ 5.000\" for a trip; she's in Lisbon.\nSecond line.",
		KeyEvents:    []string{"moved to Lisbon", "set a savings goal"},
		Preserved: memory.Preserved{
			Numbers:   []string{"R$ 5.000", "42%"},
			Dates:     []string{"2025-12-01"},
			Decisions: []string{"save R$ 500 a month"},
		},
		Tokens:        37,
		CoveredTokens: 1234,
		CreatedAt:     baseTime.Add(90 * time.Second),
	}
	if err := s.SaveSummary(testCtx(t), want); err != nil {
		t.Fatalf("SaveSummary: %v", err)
	}
	assertSummary(t, mustLatestSummary(t, s, id), want)
}

// testSummaryVersions covers the version rule: only latest+1 is accepted; a
// stale, duplicate or skipped version is memory.ErrConflict and stores nothing.
func testSummaryVersions(t *testing.T, s KnowledgeStore) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	mustSave(t, s, simple(t, id, 1))
	for _, v := range []int{0, 2, -1} {
		if err := s.SaveSummary(testCtx(t), summary(id, v, 2)); !errors.Is(err, memory.ErrConflict) {
			t.Fatalf("SaveSummary(version %d) first = %v, want memory.ErrConflict", v, err)
		}
	}
	if _, err := s.LatestSummary(testCtx(t), id); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("after rejected versions, LatestSummary = %v, want memory.ErrNotFound", err)
	}
	for v := 1; v <= 3; v++ {
		if err := s.SaveSummary(testCtx(t), summary(id, v, int64(2*v))); err != nil {
			t.Fatalf("SaveSummary(version %d): %v", v, err)
		}
		assertSummary(t, mustLatestSummary(t, s, id), summary(id, v, int64(2*v)))
	}
	tests := []struct {
		name    string
		version int
	}{
		{"duplicate of latest", 3},
		{"stale", 2},
		{"first again", 1},
		{"skips a version", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := summary(id, tt.version, 99)
			bad.Text = "must not be stored"
			if err := s.SaveSummary(testCtx(t), bad); !errors.Is(err, memory.ErrConflict) {
				t.Fatalf("SaveSummary(version %d) = %v, want memory.ErrConflict", tt.version, err)
			}
			assertSummary(t, mustLatestSummary(t, s, id), summary(id, 3, 6))
		})
	}
	if err := s.SaveSummary(testCtx(t), summary(id, 4, 8)); err != nil {
		t.Fatalf("SaveSummary(version 4) after conflicts: %v", err)
	}
	assertSummary(t, mustLatestSummary(t, s, id), summary(id, 4, 8))
}

// testSummaryTenantIsolation covers summaries of the same conversation id
// under another user and another tenant: versions are counted separately.
func testSummaryTenantIsolation(t *testing.T, s KnowledgeStore) {
	ids := []memory.Identity{
		{Tenant: "acme", User: "alice", Conversation: "c1"},
		{Tenant: "acme", User: "bob", Conversation: "c1"},
		{Tenant: "other", User: "alice", Conversation: "c1"},
	}
	for _, id := range ids {
		mustSave(t, s, simple(t, id, 1))
	}
	for v := 1; v <= 2; v++ {
		if err := s.SaveSummary(testCtx(t), summary(ids[0], v, 2)); err != nil {
			t.Fatalf("SaveSummary(%+v, %d): %v", ids[0], v, err)
		}
	}
	for _, id := range ids[1:] {
		if _, err := s.LatestSummary(testCtx(t), id); !errors.Is(err, memory.ErrNotFound) {
			t.Fatalf("LatestSummary(%+v) = %v, want memory.ErrNotFound", id, err)
		}
		if err := s.SaveSummary(testCtx(t), summary(id, 2, 2)); !errors.Is(err, memory.ErrConflict) {
			t.Fatalf("SaveSummary(%+v, version 2) = %v, want memory.ErrConflict", id, err)
		}
		want := summary(id, 1, 2)
		want.Text = "summary of " + id.Tenant + "/" + id.User
		if err := s.SaveSummary(testCtx(t), want); err != nil {
			t.Fatalf("SaveSummary(%+v, version 1): %v", id, err)
		}
		assertSummary(t, mustLatestSummary(t, s, id), want)
	}
	assertSummary(t, mustLatestSummary(t, s, ids[0]), summary(ids[0], 2, 2))
}

// testDeleteConversationErasesItems covers DeleteConversation on knowledge:
// the conversation's summaries and items go, the user's facts and other
// conversations stay.
func testDeleteConversationErasesItems(t *testing.T, s KnowledgeStore) {
	keep := memory.Identity{Tenant: "acme", User: "alice", Conversation: "keep"}
	gone := memory.Identity{Tenant: "acme", User: "alice", Conversation: "gone"}
	for _, id := range []memory.Identity{keep, gone} {
		mustSave(t, s, simple(t, id, 1))
		if err := s.SaveSummary(testCtx(t), summary(id, 1, 2)); err != nil {
			t.Fatalf("SaveSummary: %v", err)
		}
		mustAddItems(t, s, item(id, "message", id.Conversation+":0", "the lighthouse keeper "+id.Conversation, vec4(1, 0, 0, 0)))
	}
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 0), 0)
	if err := s.DeleteConversation(testCtx(t), gone); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	if _, err := s.LatestSummary(testCtx(t), gone); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("LatestSummary of deleted conversation = %v, want memory.ErrNotFound", err)
	}
	mustLatestSummary(t, s, keep)
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(1, 0, 0, 0), Model: testModel, Dims: 4, Text: "lighthouse keeper", Limit: 10}
	assertRefs(t, "SearchVector after DeleteConversation", mustSearchVector(t, s, q), []string{"keep:0"})
	assertRefs(t, "SearchText after DeleteConversation", mustSearchText(t, s, q), []string{"keep:0"})
	if got := mustFacts(t, s, "acme", "alice", baseTime, false); len(got) != 1 {
		t.Fatalf("facts after DeleteConversation = %+v, want the one fact kept", got)
	}
}
