package locomo

import (
	"math"
	"strings"
	"testing"
	"time"
)

// sample is a small locomo10.json in LoCoMo's shape: session 2 opens with
// speaker B and ends with speaker A, evidence strings hold several ids and
// a stray colon, and one id names no turn.
const sample = `[{
  "sample_id": "conv-1",
  "conversation": {
    "speaker_a": "Ana", "speaker_b": "Ben",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
      {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Ben!"},
      {"speaker": "Ana", "dia_id": "D1:2", "text": "I adopted a puppy named Biscuit yesterday."},
      {"speaker": "Ben", "dia_id": "D1:3", "text": "Congrats! What breed is Biscuit?"},
      {"speaker": "Ana", "dia_id": "D1:4", "text": "A beagle."}
    ],
    "session_10_date_time": "10:04 am on 19 December, 2023",
    "session_10": [
      {"speaker": "Ben", "dia_id": "D10:1", "text": "Long time no see."}
    ],
    "session_2_date_time": "9:00 pm on 1 June, 2023",
    "session_2": [
      {"speaker": "Ben", "dia_id": "D2:1", "text": "How is Biscuit?"},
      {"speaker": "Ben", "dia_id": "D2:2", "text": "Still chewing shoes?"},
      {"speaker": "Ana", "dia_id": "D2:3", "text": "Yes, and he learned to sit."}
    ],
    "session_3_date_time": "", "session_3": []
  },
  "qa": [
    {"question": "What is the puppy's name?", "answer": "Biscuit", "evidence": ["D1:2"], "category": 4},
    {"question": "When?", "answer": 2023, "evidence": ["D1:2; D2:3", "D:1:4", "D9:9"], "category": 2},
    {"question": "What does Ana's cat like?", "adversarial_answer": "fish", "evidence": [], "category": 5}
  ]
}]`

func TestParse(t *testing.T) {
	convs, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 1 {
		t.Fatalf("%d conversations, want 1", len(convs))
	}
	c := convs[0]
	if c.ID != "conv-1" || c.Speakers != [2]string{"Ana", "Ben"} {
		t.Fatalf("id %q speakers %v", c.ID, c.Speakers)
	}
	// Sessions in numeric order (10 after 2), the empty one left out.
	var ns []int
	for _, s := range c.Sessions {
		ns = append(ns, s.N)
	}
	if len(ns) != 3 || ns[0] != 1 || ns[1] != 2 || ns[2] != 10 {
		t.Fatalf("sessions %v, want [1 2 10]", ns)
	}
	if want := time.Date(2023, time.May, 8, 13, 56, 0, 0, time.UTC); !c.Sessions[0].Date.Equal(want) {
		t.Fatalf("session 1 date %v, want %v", c.Sessions[0].Date, want)
	}
	if c.Turns() != 8 {
		t.Fatalf("%d turns, want 8", c.Turns())
	}
	if len(c.Questions) != 3 {
		t.Fatalf("%d questions, want 3", len(c.Questions))
	}
	q := c.Questions[1]
	want := []string{"D1:2", "D2:3", "D1:4"} // D9:9 names no turn
	if len(q.Evidence) != len(want) {
		t.Fatalf("evidence %v, want %v", q.Evidence, want)
	}
	for i, r := range q.Evidence {
		if got := c.Turn(r).ID; got != want[i] {
			t.Fatalf("evidence %d is %s, want %s", i, got, want[i])
		}
	}
	if q.Answer != "2023" || c.Questions[0].Answer != "Biscuit" {
		t.Fatalf("answers %q, %q", q.Answer, c.Questions[0].Answer)
	}
}

func TestParseErrors(t *testing.T) {
	for name, in := range map[string]string{
		"not JSON":      `{`,
		"bad date":      `[{"sample_id":"x","conversation":{"speaker_a":"A","speaker_b":"B","session_1_date_time":"yesterday","session_1":[{"speaker":"A","dia_id":"D1:1","text":"hi"}]},"qa":[]}]`,
		"third speaker": `[{"sample_id":"x","conversation":{"speaker_a":"A","speaker_b":"B","session_1_date_time":"1:56 pm on 8 May, 2023","session_1":[{"speaker":"C","dia_id":"D1:1","text":"hi"}]},"qa":[]}]`,
	} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestExchanges(t *testing.T) {
	convs, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	c := convs[0]
	tests := []struct {
		session int
		want    []Exchange
	}{
		{0, []Exchange{
			{0, "Hi Ben!\nI adopted a puppy named Biscuit yesterday.", "Congrats! What breed is Biscuit?"},
			{0, "A beagle.", Placeholder},
		}},
		{1, []Exchange{
			{1, Placeholder, "How is Biscuit?\nStill chewing shoes?"},
			{1, "Yes, and he learned to sit.", Placeholder},
		}},
		{2, []Exchange{{2, Placeholder, "Long time no see."}}},
	}
	for _, tt := range tests {
		got := c.Exchanges(tt.session)
		if len(got) != len(tt.want) {
			t.Fatalf("session %d: %d exchanges %+v, want %+v", tt.session, len(got), got, tt.want)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Fatalf("session %d exchange %d: %+v, want %+v", tt.session, i, got[i], tt.want[i])
			}
		}
	}
}

func TestCovered(t *testing.T) {
	turn := "I adopted a puppy named Biscuit yesterday, and he already chews my shoes."
	tests := []struct {
		name   string
		prompt string
		turn   string
		want   bool
	}{
		{"verbatim", "User: " + turn, turn, true},
		{"other punctuation and case", "- [2023-05-08] i ADOPTED a puppy -- named biscuit yesterday and he already chews my shoes!!", turn, true},
		{"half of its 5-grams", "I adopted a puppy named Biscuit yesterday, and he", turn, true},
		{"a third", "I adopted a puppy named Biscuit", turn, false},
		{"absent", "We talked about the weather.", turn, false},
		{"short turn whole", "Ana said: a beagle, I think", "A beagle.", true},
		{"short turn split", "a big beagle", "A beagle.", false},
		{"short turn as part of a word", "abeagle", "A beagle.", false},
		{"no words", "…", Placeholder, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewPrompt(tt.prompt).Covered(tt.turn); got != tt.want {
				t.Fatalf("Covered = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDepthBucket(t *testing.T) {
	for ago, want := range map[int]string{0: DepthBuckets[0], 1: DepthBuckets[0], 2: DepthBuckets[1], 4: DepthBuckets[1], 5: DepthBuckets[2], 10: DepthBuckets[3], 19: DepthBuckets[3], 20: DepthBuckets[4], 31: DepthBuckets[4]} {
		if got := DepthBucket(ago); got != want {
			t.Errorf("DepthBucket(%d) = %q, want %q", ago, got, want)
		}
	}
}

func TestSplit(t *testing.T) {
	block := "<memory>\nWhat memgate remembers about this user and conversation.\n\n" +
		"Pinned — the user's standing goals, limits, preferences and decisions:\n- goal: save for a trip\n\n" +
		"Summary of the earlier conversation:\nAna adopted a puppy.\n\n" +
		"Facts about the user:\n- pet: Biscuit\n\n" +
		"Recalled from earlier messages:\n- [2023-05-08, conversation c] user: I adopted a puppy\n</memory>"
	prompt := []Message{
		{"system", "You are helpful."},
		{"system", block},
		{"user", "Hi"},
		{"assistant", "Hello"},
		{"user", "What is my dog's name?"},
	}
	got := Split(prompt)
	want := map[string]string{
		PartSystem:  "You are helpful.",
		PartPinned:  "- goal: save for a trip",
		PartSummary: "Ana adopted a puppy.",
		PartFacts:   "- pet: Biscuit",
		PartRecall:  "- [2023-05-08, conversation c] user: I adopted a puppy",
		PartRecent:  "Hi\nHello",
		PartCurrent: "What is my dog's name?",
	}
	for part, text := range want {
		if got[part] != text {
			t.Errorf("%s = %q, want %q", part, got[part], text)
		}
	}
	if h := got[PartHeader]; h == "" || !strings.Contains(h, "Recalled from earlier messages:") || !strings.Contains(h, "</memory>") {
		t.Errorf("framing %q lacks the headings or tags", h)
	}
}

func TestPrefixShare(t *testing.T) {
	for _, tt := range []struct {
		prev, cur string
		want      float64
	}{
		{"abcdef", "abcxyz", 0.5},
		{"abc", "abcdef", 0.5},
		{"abcdef", "abcdef", 1},
		{"xbc", "abc", 0},
		{"", "abc", 0},
		{"abc", "", 0},
	} {
		if got := PrefixShare(tt.prev, tt.cur); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("PrefixShare(%q, %q) = %v, want %v", tt.prev, tt.cur, got, tt.want)
		}
	}
}

func TestTally(t *testing.T) {
	tl := NewTally()
	tl.Add(1, 0, true)
	tl.Add(1, 25, false)
	tl.Add(2, 3, true)
	tl.AddPrompt(3900, 4000)
	tl.AddPrompt(4100, 4000)
	if v, _ := tl.All.Value(); math.Abs(v-2.0/3) > 1e-9 {
		t.Errorf("overall %v, want 2/3", v)
	}
	if v, _ := tl.ByCategory[1].Value(); v != 0.5 {
		t.Errorf("category 1: %v, want 0.5", v)
	}
	if r := tl.ByDepth[DepthBuckets[4]]; r == nil || r.Total != 1 || r.Covered != 0 {
		t.Errorf("20+ bucket %+v, want 0 of 1", r)
	}
	if tl.OverBudget != 1 || tl.MaxTokens != 4100 || tl.MeanTokens() != 4000 {
		t.Errorf("prompts: over %d, max %d, mean %v", tl.OverBudget, tl.MaxTokens, tl.MeanTokens())
	}
}

func TestPrefixBreak(t *testing.T) {
	sys := Message{Role: "system", Content: "You are helpful."}
	stable := func(facts string) Message {
		return Message{Role: "system", Content: "<memory>\nframing\n\nSummary of the earlier conversation:\nsum\n\nFacts about the user:\n- " + facts + "\n</memory>"}
	}
	recalled := func(p string) Message {
		return Message{Role: "system", Content: "<memory>\nframing\n\nRecalled from earlier messages:\n- " + p + "\n</memory>"}
	}
	u := func(s string) Message { return Message{Role: "user", Content: s} }
	a := func(s string) Message { return Message{Role: "assistant", Content: s} }
	prev := []Message{sys, stable("f1"), u("1"), a("1"), recalled("p1"), u("2")}
	for _, tc := range []struct {
		name string
		cur  []Message
		want string
	}{
		{"grows", append(append([]Message{}, prev...), a("2"), u("3")), BreakNone},
		{"facts change", []Message{sys, stable("f2"), u("1"), a("1"), u("2"), a("2"), recalled("p2"), u("3")}, PartFacts},
		{"recall not kept", []Message{sys, stable("f1"), u("1"), a("1"), u("2"), a("2"), recalled("p2"), u("3")}, PartRecall},
		{"window drops", []Message{sys, stable("f1"), u("2"), a("2"), recalled("p2"), u("3")}, PartRecent},
		{"recall changes in place", []Message{sys, stable("f1"), u("1"), a("1"), recalled("p2"), u("2")}, PartRecall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PrefixBreak(prev, tc.cur); got != tc.want {
				t.Errorf("PrefixBreak = %q, want %q", got, tc.want)
			}
		})
	}
}
