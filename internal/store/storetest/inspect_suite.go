package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Inspect is what the web inspector reads and changes beyond the
// conversation and Knowledge contracts.
type Inspect interface {
	// Users lists a tenant's users whose id contains match
	// (case-insensitive), most recently active first, at most limit.
	Users(ctx context.Context, tenant, match string, limit int) ([]memory.UserActivity, error)
	// Branches returns a conversation's newest limit superseded messages
	// (all for limit <= 0) grouped by the moment they left the live
	// branch, oldest first.
	Branches(ctx context.Context, id memory.Identity, limit int) ([]memory.Branch, error)
	// Summaries returns every summary version, oldest first.
	Summaries(ctx context.Context, id memory.Identity) ([]memory.Summary, error)
	// Footprint counts the rows stored about a user.
	Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error)
	// SetFactPinned pins or unpins a current fact, or memory.ErrNotFound.
	SetFactPinned(ctx context.Context, tenant, user string, id int64, pinned bool) error
	// AddSavings adds bucket counts; Savings reads a tenant's buckets since a time.
	AddSavings(ctx context.Context, bs []memory.SavingsBucket) error
	Savings(ctx context.Context, tenant string, since time.Time) ([]memory.SavingsBucket, error)
}

// InspectStore is a store with the conversation, Knowledge and Inspect
// contracts.
type InspectStore interface {
	KnowledgeStore
	Inspect
}

// RunInspect runs the Inspect contract suite; open returns a fresh, empty
// store for every call.
func RunInspect(t *testing.T, open func(t *testing.T) InspectStore) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s InspectStore)
	}{
		{"Users", testUsers},
		{"Branches", testBranches},
		{"SummaryHistory", testSummaryHistory},
		{"FootprintAndErasure", testFootprint},
		{"SetFactPinned", testSetFactPinned},
		{"Savings", testSavings},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, open(t)) })
	}
}

func testUsers(t *testing.T, s InspectStore) {
	ctx := testCtx(t)
	for i, u := range []string{"Alice", "bob", "alina"} {
		mustSave(t, s, simple(t, memory.Identity{Tenant: "acme", User: u, Conversation: "c1"}, i+1))
	}
	mustSave(t, s, simple(t, memory.Identity{Tenant: "acme", User: "bob", Conversation: "c2"}, 10))
	mustSave(t, s, simple(t, memory.Identity{Tenant: "other", User: "alien", Conversation: "c1"}, 11))
	tests := []struct {
		match string
		limit int
		want  []string
	}{
		{"", 0, []string{"bob", "alina", "Alice"}},
		{"AL", 0, []string{"alina", "Alice"}},
		{"", 1, []string{"bob"}},
		{"zzz", 0, nil},
	}
	for _, tt := range tests {
		us, err := s.Users(ctx, "acme", tt.match, tt.limit)
		if err != nil {
			t.Fatalf("Users(%q): %v", tt.match, err)
		}
		var got []string
		for _, u := range us {
			got = append(got, u.User)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("Users(%q, %d) = %v, want %v", tt.match, tt.limit, got, tt.want)
		}
	}
	us, _ := s.Users(ctx, "acme", "bob", 0)
	if len(us) != 1 || us[0].Conversations != 2 || us[0].Messages != 4 || !us[0].LastActive.Equal(baseTime.Add(10*time.Second)) {
		t.Errorf("bob = %+v, want 2 conversations, 4 messages, active at %v", us, baseTime.Add(10*time.Second))
	}
}

func testBranches(t *testing.T, s InspectStore) {
	ctx := testCtx(t)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "edits"}
	u := func(n string) memory.Message { return msg(t, "user", "question "+n) }
	a := func(n string) memory.Message { return msg(t, "assistant", "answer "+n) }
	mustSave(t, s, exchange(id, "e1", 1, nil, []memory.Message{u("1")}, a("1")))
	mustSave(t, s, exchange(id, "e2", 2, []memory.Message{u("1"), a("1")}, []memory.Message{u("2")}, a("2")))
	bs, err := s.Branches(ctx, id, 0)
	if err != nil || len(bs) != 0 {
		t.Fatalf("Branches before any edit = %+v, %v", bs, err)
	}
	// The client regenerates answer 2, then edits question 2.
	mustSave(t, s, exchange(id, "e3", 3, []memory.Message{u("1"), a("1")}, []memory.Message{u("2")}, a("2 again")))
	mustSave(t, s, exchange(id, "e4", 4, []memory.Message{u("1"), a("1"), u("2 edited"), a("2 edited")}, []memory.Message{u("3")}, a("3")))
	bs, err = s.Branches(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bs {
		got = append(got, fmt.Sprint(contents(b.Messages)))
		if b.SupersededAt.IsZero() {
			t.Errorf("branch without a time: %+v", b)
		}
	}
	if len(bs) != 2 || got[0] != "[user:question 2 assistant:answer 2]" ||
		got[1] != "[user:question 2 assistant:answer 2 again]" {
		t.Fatalf("Branches = %q", got)
	}
	if !bs[0].SupersededAt.Before(bs[1].SupersededAt) && !bs[0].SupersededAt.Equal(bs[1].SupersededAt) {
		t.Errorf("branches out of order: %v then %v", bs[0].SupersededAt, bs[1].SupersededAt)
	}
	_, live := mustConversation(t, s, id)
	assertContents(t, "live branch", live, []string{"user:question 1", "assistant:answer 1",
		"user:question 2 edited", "assistant:answer 2 edited", "user:question 3", "assistant:answer 3"})
	if other, _ := s.Branches(ctx, memory.Identity{Tenant: "other", User: "alice", Conversation: "edits"}, 0); len(other) != 0 {
		t.Errorf("another tenant sees branches: %+v", other)
	}
	// A limit keeps the newest superseded messages: the inspector shows
	// those of a conversation regenerated ten thousand times.
	bs, err = s.Branches(ctx, id, 3)
	got = got[:0]
	for _, b := range bs {
		got = append(got, fmt.Sprint(contents(b.Messages)))
	}
	if err != nil || len(bs) != 2 || got[0] != "[assistant:answer 2]" || got[1] != "[user:question 2 assistant:answer 2 again]" {
		t.Fatalf("Branches(limit 3) = %q, %v", got, err)
	}
}

func testSummaryHistory(t *testing.T, s InspectStore) {
	ctx := testCtx(t)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "long"}
	for n := 1; n <= 3; n++ {
		mustSave(t, s, simple(t, id, n))
	}
	if sums, err := s.Summaries(ctx, id); err != nil || len(sums) != 0 {
		t.Fatalf("Summaries before any = %+v, %v", sums, err)
	}
	for v, by := range []string{"model", "extractive"} {
		sum := memory.Summary{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation, Version: v + 1,
			FromSeq: 1, ToSeq: int64(2 * (v + 1)), Text: fmt.Sprintf("summary %d", v+1), KeyEvents: []string{fmt.Sprintf("event %d", v+1)},
			Preserved: memory.Preserved{Numbers: []string{"42"}}, Tokens: 5, CoveredTokens: 10 * (v + 1), Summariser: by,
			CreatedAt: baseTime.Add(time.Duration(v) * time.Minute)}
		if err := s.SaveSummary(ctx, sum); err != nil {
			t.Fatal(err)
		}
	}
	sums, err := s.Summaries(ctx, id)
	if err != nil || len(sums) != 2 {
		t.Fatalf("Summaries = %+v, %v", sums, err)
	}
	for i, want := range []struct {
		by    string
		to    int64
		event string
	}{{"model", 2, "event 1"}, {"extractive", 4, "event 2"}} {
		got := sums[i]
		if got.Version != i+1 || got.Summariser != want.by || got.ToSeq != want.to || got.FromSeq != 1 ||
			len(got.KeyEvents) != 1 || got.KeyEvents[0] != want.event || len(got.Preserved.Numbers) != 1 ||
			got.CoveredTokens != 10*(i+1) || !got.CreatedAt.Equal(baseTime.Add(time.Duration(i)*time.Minute)) {
			t.Errorf("summary %d = %+v", i+1, got)
		}
	}
	// The prompt reads the latest version, and who wrote it decides its
	// share (an extractive summary's is memory.shares.extractive_summary).
	if latest, err := s.LatestSummary(ctx, id); err != nil || latest.Version != 2 || latest.Summariser != "extractive" {
		t.Fatalf("LatestSummary = %+v, %v; want version 2 by the extractive summariser", latest, err)
	}
}

func testFootprint(t *testing.T, s InspectStore) {
	ctx := testCtx(t)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	mustSave(t, s, simple(t, id, 1))
	mustSave(t, s, simple(t, id, 2))
	mustSave(t, s, simple(t, memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}, 3))
	if err := s.SaveSummary(ctx, memory.Summary{Tenant: "acme", User: "alice", Conversation: "c1", Version: 1, FromSeq: 1, ToSeq: 2, Text: "s"}); err != nil {
		t.Fatal(err)
	}
	mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Porto", 0), 0)
	if err := s.AddItems(ctx, []memory.Item{{Tenant: "acme", User: "alice", Conversation: "c1", Kind: "message", Ref: "k1", Text: "hello"}}); err != nil {
		t.Fatal(err)
	}
	fp, err := s.Footprint(ctx, "acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if fp.Conversations != 1 || fp.Messages != 4 || fp.Summaries != 1 || fp.Facts != 1 || fp.Items != 1 || fp.Empty() {
		t.Fatalf("Footprint = %+v", fp)
	}
	if err := s.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	if fp, err := s.Footprint(ctx, "acme", "alice"); err != nil || !fp.Empty() {
		t.Fatalf("Footprint after erasure = %+v, %v", fp, err)
	}
	if fp, _ := s.Footprint(ctx, "acme", "bob"); fp.Messages != 2 {
		t.Errorf("bob's footprint after erasing alice = %+v", fp)
	}
}

func testSetFactPinned(t *testing.T, s InspectStore) {
	ctx := testCtx(t)
	old := mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Lisbon", 0), 0)
	cur := mustUpsertFact(t, s, fact("acme", "alice", memory.FactProfile, "city", "Porto", 1), 0)
	for _, pinned := range []bool{true, false} {
		if err := s.SetFactPinned(ctx, "acme", "alice", cur.ID, pinned); err != nil {
			t.Fatal(err)
		}
		fs := mustFacts(t, s, "acme", "alice", baseTime.Add(time.Hour), false)
		if len(fs) != 1 || fs[0].Pinned != pinned {
			t.Fatalf("after SetFactPinned(%v): %+v", pinned, fs)
		}
	}
	for name, call := range map[string]func() error{
		"superseded fact": func() error { return s.SetFactPinned(ctx, "acme", "alice", old.ID, true) },
		"other user":      func() error { return s.SetFactPinned(ctx, "acme", "bob", cur.ID, true) },
		"other tenant":    func() error { return s.SetFactPinned(ctx, "other", "alice", cur.ID, true) },
	} {
		if err := call(); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("%s: %v, want memory.ErrNotFound", name, err)
		}
	}
	if fs := mustFacts(t, s, "acme", "alice", baseTime.Add(time.Hour), false); fs[0].Pinned {
		t.Error("pinned through another scope")
	}
}

func testSavings(t *testing.T, s InspectStore) {
	ctx := testCtx(t)
	b1, b2 := baseTime, baseTime.Add(5*time.Minute)
	add := func(bs ...memory.SavingsBucket) {
		t.Helper()
		if err := s.AddSavings(ctx, bs); err != nil {
			t.Fatal(err)
		}
	}
	add(memory.SavingsBucket{Tenant: "acme", Start: b1, Requests: 2, TokensOriginal: 1000, TokensSent: 300, Degraded: 1, TokensRepeated: 200, TokensCached: 128},
		memory.SavingsBucket{Tenant: "other", Start: b1, Requests: 9, TokensOriginal: 9, TokensSent: 9, TokensRepeated: 9})
	add(memory.SavingsBucket{Tenant: "acme", Start: b1, Requests: 1, TokensOriginal: 500, TokensSent: 100, TokensRepeated: 60},
		memory.SavingsBucket{Tenant: "acme", Start: b2, Requests: 1, TokensOriginal: 50, TokensSent: 50})
	add()
	got, err := s.Savings(ctx, "acme", b1)
	if err != nil {
		t.Fatal(err)
	}
	want := []memory.SavingsBucket{
		{Tenant: "acme", Start: b1, Requests: 3, TokensOriginal: 1500, TokensSent: 400, Degraded: 1, TokensRepeated: 260, TokensCached: 128},
		{Tenant: "acme", Start: b2, Requests: 1, TokensOriginal: 50, TokensSent: 50},
	}
	if len(got) != 2 || !got[0].Start.Equal(b1) || !got[1].Start.Equal(b2) {
		t.Fatalf("Savings = %+v", got)
	}
	for i := range got {
		got[i].Start = want[i].Start
		if got[i] != want[i] {
			t.Errorf("bucket %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if later, _ := s.Savings(ctx, "acme", b1.Add(time.Minute)); len(later) != 1 || later[0].Requests != 1 {
		t.Errorf("Savings since a later time = %+v", later)
	}
}
