package tokens

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/memgate/memgate/internal/memory"
)

// TestCounterRemembersLongTextsAndMessages: a long text or message counted
// again is answered from the memo with the same count; short ones, other
// encodings, and a message against its own JSON as text are counted apart.
func TestCounterRemembersLongTextsAndMessages(t *testing.T) {
	long := strings.Repeat("a stored turn that comes back on every request ", 3)
	raw := json.RawMessage(fmt.Sprintf(`{"role":"user","content":%q}`, long))
	tests := []struct {
		name      string
		calls     func(c *Counter) []int
		held, hit int // counts the memo holds and lookups it answered after calls
	}{
		// The message, and its long content as a text.
		{"a long message is counted once", func(c *Counter) []int {
			return []int{c.RawMessage("gpt-4o", raw), c.RawMessage("gpt-4o", raw)}
		}, 2, 1},
		{"a long text is counted once", func(c *Counter) []int {
			return []int{c.Text("gpt-4o", long), c.Text("gpt-4o", long)}
		}, 1, 1},
		{"models of one encoding share a count", func(c *Counter) []int {
			return []int{c.Text("gpt-4o", long), c.Text("gpt-4o-mini", long)}
		}, 1, 1},
		{"encodings are counted apart", func(c *Counter) []int {
			return []int{c.Text("gpt-4o", long), c.Text("gpt-4", long), c.Text("gpt-4o", long)}
		}, 2, 1},
		{"a message and its JSON as text are counted apart", func(c *Counter) []int {
			return []int{c.RawMessage("gpt-4o", raw), c.Text("gpt-4o", string(raw))}
		}, 3, 0},
		{"short texts and messages are not remembered", func(c *Counter) []int {
			return []int{c.Text("gpt-4o", "hi"), c.Text("gpt-4o", "hi"),
				c.RawMessage("gpt-4o", json.RawMessage(`{"role":"user","content":"hi"}`)),
				c.RawMessage("gpt-4o", json.RawMessage(`{"role":"user","content":"hi"}`))}
		}, 0, 0},
		{"different texts of one length are counted apart", func(c *Counter) []int {
			other := strings.Repeat("b", len(long))
			return []int{c.Text("gpt-4o", long), c.Text("gpt-4o", other), c.Text("gpt-4o", other)}
		}, 2, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(nil)
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := New(nil)
			if err != nil {
				t.Fatal(err)
			}
			got := tc.calls(c)
			// The same calls on counters that remember nothing yet, one
			// call each: the remembered counts must be the counted ones.
			for i, n := range got {
				if want := tc.calls(fresh)[i]; n != want {
					t.Errorf("call %d: %d tokens, want %d", i, n, want)
				}
				fresh, _ = New(nil)
			}
			if held, hits := memoStats(c.memo); held != tc.held || hits != tc.hit {
				t.Errorf("memo holds %d counts and answered %d lookups, want %d and %d", held, hits, tc.held, tc.hit)
			}
		})
	}
}

// memoStats returns how many counts m holds and how many lookups it
// answered.
func memoStats(m *memo) (held, hits int) {
	held, _ = m.counts.Usage()
	var d dto.Metric
	if err := m.counts.Collectors()[0].(prometheus.Metric).Write(&d); err != nil {
		panic(err)
	}
	return held, int(d.GetCounter().GetValue())
}

// TestMemoBounded counts far more distinct texts than a memo holds: it
// stays within its bound, answers right, and still holds the newest.
func TestMemoBounded(t *testing.T) {
	m, e := newMemo(), &encoding{name: "e"}
	limit := memoBytes / memoCountBytes
	for i := range 3 * limit {
		s := fmt.Sprint("text ", i)
		if got := m.count(0, kindText, e, s, nil, func() int { return len(s) }); got != len(s) {
			t.Fatalf("text %d: %d, want %d", i, got, len(s))
		}
	}
	held, bytes := m.counts.Usage()
	if bytes > memoBytes {
		t.Fatalf("memo accounts %d bytes, bound %d", bytes, memoBytes)
	}
	if held > limit || held == 0 {
		t.Fatalf("memo holds %d counts, want 1..%d", held, limit)
	}
	s := fmt.Sprint("text ", 3*limit-1)
	if got := m.count(0, kindText, e, s, nil, func() int { t.Error("the newest text was counted again"); return 0 }); got != len(s) {
		t.Fatalf("newest text: %d, want %d", got, len(s))
	}
}

// TestSystemMessageIsRawMessage: counting a system message from its text
// gives what counting its JSON gives.
func TestSystemMessageIsRawMessage(t *testing.T) {
	c, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"", "x", "<memory>\n- a\n</memory>", "line\nbreaks\tand \"quotes\" \\ 日本",
		strings.Repeat("word ", 5000)} {
		raw, err := json.Marshal(map[string]string{"role": "system", "content": text})
		if err != nil {
			t.Fatal(err)
		}
		for _, model := range []string{"gpt-4o-mini", "gpt-4", "unknown-model"} {
			if got, want := c.SystemMessage(model, text), c.RawMessage(model, raw); got != want {
				t.Errorf("%s: SystemMessage(%.20q) = %d, RawMessage = %d", model, text, got, want)
			}
		}
	}
}

// TestMemoKeysSeparate: a text's count is found again each time, whether
// the text comes as a string or as bytes, and never for another scope,
// kind, encoding, length or text.
func TestMemoKeysSeparate(t *testing.T) {
	c, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	m := c.memo
	text := strings.Repeat("a line of text\n", 10)
	seen := 0
	for _, view := range []*Counter{c, c.Owned("t", "u"), c.Owned("t", "v"), c.Owned("s", "u")} {
		for _, kind := range []byte{kindText, kindMessage, kindSegment} {
			for _, enc := range []*encoding{c.o200k, c.cl100k, {name: "other"}} {
				for _, s := range []string{text, text[:len(text)-1], "b" + text[1:]} {
					name := fmt.Sprintf("%x %c %s %.20q", view.scope, kind, enc.name, s)
					seen++
					if n := m.count(view.scope, kind, enc, s, nil, func() int { return seen }); n != seen {
						t.Errorf("%s has the count of another text (%d)", name, n)
					}
					again := func() int { t.Errorf("%s counted again", name); return 0 }
					if n := m.count(view.scope, kind, enc, "", []byte(s), again); n != seen {
						t.Errorf("%s: count of bytes %d, of the string %d", name, n, seen)
					}
					if n := m.count(view.scope, kind, enc, s, nil, again); n != seen {
						t.Errorf("%s: count %d, then %d", name, seen, n)
					}
				}
			}
		}
	}
}

// Work counts what was tokenized, not what the memo answered.
func TestWorkCountsTokenizedBytes(t *testing.T) {
	c, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("all work and no play makes jack a dull boy ", 10)
	c.Text("gpt-4o", text)
	w := c.Work()
	if w.Texts != 1 || w.Bytes != int64(len(text)) || w.Lookups <= 0 || w.Lookups > 3*int64(len(text)) {
		t.Fatalf("work after one text of %d bytes: %+v", len(text), w)
	}
	c.Text("gpt-4o", text)
	if again := c.Work(); again != w {
		t.Fatalf("a remembered count added work: %+v, then %+v", w, again)
	}
	c.Text("gpt-4", text)
	if other := c.Work(); other.Texts != 2 || other.Bytes != 2*int64(len(text)) {
		t.Fatalf("the other encoding's count: %+v", other)
	}
}

// TestOwnedCountsStayWithTheirOwner: a text one owner had counted is
// counted anew for every other owner — another tenant, another user of the
// same tenant, the owner-less counter — and answered from the memo only
// for its owner, whole, as a message and line by line; so no request's
// latency tells whether someone else's prompt held the same text. Views of
// one owner share their counts, and every view counts right.
func TestOwnedCountsStayWithTheirOwner(t *testing.T) {
	var lines strings.Builder
	for i := range 40 {
		fmt.Fprintf(&lines, "- a line of the memory block that recurs, number %d\n", i)
	}
	long := strings.Repeat("a stored turn that comes back on every request ", 3)
	raw := json.RawMessage(fmt.Sprintf(`{"role":"user","content":%q}`, long))
	m := memory.Message{Role: "user", Content: long, Raw: raw}
	for _, tc := range []struct {
		name  string
		count func(c *Counter) int
	}{
		{"text", func(c *Counter) int { return c.Text("gpt-4o", long) }},
		{"raw message", func(c *Counter) int { return c.RawMessage("gpt-4o", raw) }},
		{"message", func(c *Counter) int { return c.Message("gpt-4o", m) }},
		{"system message", func(c *Counter) int { return c.SystemMessage("gpt-4o", long) }},
		{"messages", func(c *Counter) int { return c.Messages("gpt-4o", []json.RawMessage{raw, raw}) }},
		{"multi-line text", func(c *Counter) int { return c.Text("gpt-4", lines.String()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(nil)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.count(c) // the owner-less count
			// counted reports whether the count of view tokenized anything
			// (the memo did not answer it all), and checks the count.
			counted := func(view *Counter) bool {
				before := c.Work()
				if got := tc.count(view); got != want {
					t.Errorf("%d tokens, want %d", got, want)
				}
				return c.Work() != before
			}
			a := c.Owned("acme", "alice")
			if !counted(a) {
				t.Fatal("alice's first count was answered from the owner-less counter's")
			}
			if counted(a) || counted(c.Owned("acme", "alice")) {
				t.Error("alice's count again was not answered from the memo")
			}
			for _, other := range []struct{ tenant, user string }{
				{"globex", "alice"}, {"acme", "bob"}, {"acmea", "lice"}, {"", "acmealice"},
			} {
				if !counted(c.Owned(other.tenant, other.user)) {
					t.Errorf("%s/%s was answered from alice's count", other.tenant, other.user)
				}
			}
			// Nor is the owner-less counter answered from an owner's counts.
			c2, err := New(nil)
			if err != nil {
				t.Fatal(err)
			}
			tc.count(c2.Owned("acme", "alice"))
			before := c2.Work()
			tc.count(c2)
			if c2.Work() == before {
				t.Error("the owner-less counter was answered from alice's count")
			}
		})
	}
}
