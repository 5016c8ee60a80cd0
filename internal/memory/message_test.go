package memory

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseMessage(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		role    string
		content string
		wantErr bool
	}{
		{"string content", `{"role":"user","content":"hello"}`, "user", "hello", false},
		{"null content with tool calls", `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lisbon\"}"}}]}`, "assistant", `[tool_call get_weather({"city":"Lisbon"})]`, false},
		{"parts with image", `{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA"}}]}`, "user", "what is this?\n[image]", false},
		{"refusal", `{"role":"assistant","content":null,"refusal":"I can't help with that."}`, "assistant", "I can't help with that.", false},
		{"tool result", `{"role":"tool","tool_call_id":"c1","content":"18C"}`, "tool", "18C", false},
		{"no role", `{"content":"x"}`, "", "", true},
		{"not an object", `"hi"`, "", "", true},
		{"bad content", `{"role":"user","content":42}`, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMessage(json.RawMessage(tt.raw))
			if tt.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Role != tt.role || m.Content != tt.content || string(m.Raw) != tt.raw {
				t.Fatalf("got role=%q content=%q raw=%s", m.Role, m.Content, m.Raw)
			}
		})
	}
}

func msgs(spec ...string) []Message {
	out := make([]Message, 0, len(spec)/2)
	for i := 0; i+1 < len(spec); i += 2 {
		out = append(out, Message{Role: spec[i], Content: spec[i+1], Seq: int64(len(out) + 1)})
	}
	return out
}

func TestAlign(t *testing.T) {
	stored := msgs("user", "a", "assistant", "b", "user", "c", "assistant", "d")
	tests := []struct {
		name          string
		stored, prior []Message
		supersede     int64
		newPrior      []string
	}{
		{"new-only client", stored, nil, 0, nil},
		{"in sync full history", stored, msgs("user", "a", "assistant", "b", "user", "c", "assistant", "d"), 0, nil},
		{"window of history", stored, msgs("user", "c", "assistant", "d"), 0, nil},
		{"history never seen", stored, msgs("user", "x", "assistant", "y"), 0, []string{"x", "y"}},
		{"nothing stored", nil, msgs("user", "x", "assistant", "y"), 0, []string{"x", "y"}},
		{"client knows more", msgs("user", "a", "assistant", "b"), msgs("user", "a", "assistant", "b", "user", "c", "assistant", "d"), 0, []string{"c", "d"}},
		{"regenerated last reply", stored, msgs("user", "a", "assistant", "b"), 3, nil},
		{"edited earlier turn", stored, msgs("user", "a", "assistant", "b", "user", "C2", "assistant", "D2"), 3, []string{"C2", "D2"}},
		{"repeated turns pick latest", msgs("user", "ok", "assistant", "sure", "user", "ok", "assistant", "sure"), msgs("user", "ok", "assistant", "sure"), 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Align(tt.stored, tt.prior)
			if p.SupersedeFrom != tt.supersede {
				t.Errorf("SupersedeFrom = %d, want %d", p.SupersedeFrom, tt.supersede)
			}
			var got []string
			for _, m := range p.Prior {
				got = append(got, m.Content)
			}
			if len(got) != len(tt.newPrior) {
				t.Fatalf("new prior = %q, want %q", got, tt.newPrior)
			}
			for i := range got {
				if got[i] != tt.newPrior[i] {
					t.Fatalf("new prior = %q, want %q", got, tt.newPrior)
				}
			}
		})
	}
}

func TestValidIDAndMode(t *testing.T) {
	for id, ok := range map[string]bool{
		"u-1": true, "ann+chat@example.com": true, "a.b:c@d_e": true, "AZaz09": true, strings.Repeat("x", 128): true,
		"": false, "has space": false, "é": false, "a/b": false, "a\nb": false, "[x]": false, "x`": false,
		strings.Repeat("x", 129): false, string(make([]byte, 129)): false,
	} {
		if ValidID(id) != ok {
			t.Errorf("ValidID(%q) = %v", id, !ok)
		}
	}
	for s, want := range map[string]Mode{"": ModeOn, "on": ModeOn, "off": ModeOff, "read": ModeRead, "write": ModeWrite} {
		m, err := ParseMode(s)
		if err != nil || m != want {
			t.Errorf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseMode("maybe"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseMode(maybe) err = %v", err)
	}
	if !ModeRead.Injects() || ModeRead.Stores() || ModeWrite.Injects() || !ModeWrite.Stores() || ModeOff.Injects() || ModeOff.Stores() {
		t.Error("mode predicates wrong")
	}
}

func TestFactStatement(t *testing.T) {
	tests := []struct {
		key, value, want string
	}{
		{"city", "Porto", "city: Porto"},
		{"savings_goal", "R$ 5.000", "savings goal: R$ 5.000"},
		{"i moved to porto", "I moved to Porto last month", "I moved to Porto last month"},
		{"city", "moved to the city of Porto", "moved to the city of Porto"},
		{"", "vegetarian", "vegetarian"},
	}
	for _, tt := range tests {
		if got := (Fact{Key: tt.key, Value: tt.value}).Statement(); got != tt.want {
			t.Errorf("Statement(%q, %q) = %q, want %q", tt.key, tt.value, got, tt.want)
		}
	}
}

// TestParseMessageKeepsWhatTheCountReads: ParseMessage keeps the fields
// the token count reads, and Decoded reads Raw again once Raw is other
// bytes than those parsed.
func TestParseMessageKeepsWhatTheCountReads(t *testing.T) {
	raw := json.RawMessage(`{"role":"assistant","name":"bot","refusal":"no","content":[{"type":"text","text":"hi"},` +
		`{"type":"image_url","image_url":{"url":"u","detail":"low"}},{"type":"input_image","detail":"high"}],` +
		`"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}],"function_call":{"name":"g","arguments":"[]"}}`)
	m, err := ParseMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	p := m.Decoded()
	want := Parsed{Role: "assistant", Name: "bot", Refusal: "no",
		Parts: []Part{{Type: "text", Text: "hi"}, {Type: "image_url", Detail: "low"}, {Type: "input_image", Detail: "high"}},
		Calls: []FunctionCall{{Name: "f", Arguments: "{}"}, {Name: "g", Arguments: "[]"}}}
	p.from, want.from = nil, nil
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("Decoded = %+v\nwant %+v", p, want)
	}
	if !m.HasToolCalls() {
		t.Fatal("HasToolCalls = false")
	}
	// Another Raw (as redaction gives): read again, not the parse's.
	m.Raw = json.RawMessage(`{"role":"assistant","content":"plain"}`)
	if p := m.Decoded(); p.Text != "plain" || p.Calls != nil || p.Name != "" {
		t.Fatalf("Decoded after Raw changed = %+v", p)
	}
	if m.HasToolCalls() {
		t.Fatal("HasToolCalls after Raw changed = true")
	}
	if b := m.Bare(); b.parsed != nil {
		t.Fatal("Bare kept the parse")
	}
}

// TestDecodeNeverFails: what ParseMessage rejects still decodes, for the
// count: a JSON value that is no message's object as Malformed, a message
// without a role or with a bad content with what it holds.
func TestDecodeNeverFails(t *testing.T) {
	tests := []struct {
		raw  string
		want Parsed
	}{
		{`not json`, Parsed{Malformed: true}},
		{``, Parsed{Malformed: true}},
		{`"hi"`, Parsed{Malformed: true}},
		{`{"role":"assistant","function_call":"x"}`, Parsed{Malformed: true, Role: "assistant"}},
		{`{"content":"no role"}`, Parsed{Text: "no role"}},
		{`{"role":"user","content":42}`, Parsed{Role: "user", Text: "42"}},
		{`{"role":"user","content":[{"type":"input_image","image_url":"https://x"}]}`, Parsed{Role: "user", Text: `[{"type":"input_image","image_url":"https://x"}]`}},
		{`{"role":"assistant","tool_calls":[{"id":5,"function":{"name":"f"}}]}`, Parsed{Role: "assistant", Calls: []FunctionCall{{Name: "f"}}}},
	}
	for _, tt := range tests {
		got := Decode(json.RawMessage(tt.raw))
		got.from = nil
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Decode(%s) = %+v, want %+v", tt.raw, got, tt.want)
		}
	}
}

func TestOfExchange(t *testing.T) {
	var msgs []Message
	for _, k := range []string{"ex:0", "ex2:0", "ex:12", "ex:", "ex:1x", "ex:b:0", "ex:b:1", "x-ex:3"} {
		msgs = append(msgs, Message{Key: k})
	}
	keys := func(ms []Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Key)
		}
		return out
	}
	if got := keys(OfExchange("ex", msgs)); !slices.Equal(got, []string{"ex:0", "ex:12"}) {
		t.Errorf("OfExchange(ex) = %q, want ex:0 and ex:12", got)
	}
	if got := keys(OfExchange("ex:b", msgs)); !slices.Equal(got, []string{"ex:b:0", "ex:b:1"}) {
		t.Errorf("OfExchange(ex:b) = %q, want ex:b:0 and ex:b:1", got)
	}
}

// TestRepliesCompareWithoutTheWhiteSpaceAround: an assistant's reply
// resent trimmed (chat apps trim a model's line breaks) is the same turn,
// with the same print, as the reply memgate stored; a user's message, or a
// reply that differs inside, is not; a branch's id still hashes the text
// as it was said.
func TestRepliesCompareWithoutTheWhiteSpaceAround(t *testing.T) {
	for _, tt := range []struct {
		name       string
		stored     Message
		resent     Message
		sameTurn   bool
		sameBranch bool
	}{
		{"reply trimmed", Message{Role: "assistant", Content: "\n\nHi there.\n"}, Message{Role: "assistant", Content: "Hi there."}, true, false},
		{"reply with tabs and form feeds", Message{Role: "assistant", Content: "\t\v\fHi\r\n"}, Message{Role: "assistant", Content: "Hi"}, true, false},
		{"reply as stored", Message{Role: "assistant", Content: "Hi"}, Message{Role: "assistant", Content: "Hi"}, true, true},
		{"reply differing inside", Message{Role: "assistant", Content: "Hi  there"}, Message{Role: "assistant", Content: "Hi there"}, false, false},
		{"reply with a no-break space around", Message{Role: "assistant", Content: "\u00a0Hi"}, Message{Role: "assistant", Content: "Hi"}, false, false},
		{"user message trimmed", Message{Role: "user", Content: "hello\n"}, Message{Role: "user", Content: "hello"}, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.stored.Fingerprint() == tt.resent.Fingerprint(); got != tt.sameTurn {
				t.Errorf("same fingerprint = %v, want %v", got, tt.sameTurn)
			}
			if got := tt.stored.Print() == tt.resent.Print(); got != tt.sameTurn {
				t.Errorf("same print = %v, want %v", got, tt.sameTurn)
			}
			q := Message{Role: "user", Content: "q"}
			a, b := BranchOf("seed", []Message{q, tt.stored}, 1), BranchOf("seed", []Message{q, tt.resent}, 1)
			if got := a == b; got != tt.sameBranch {
				t.Errorf("same branch id = %v, want %v", got, tt.sameBranch)
			}
		})
	}
}

// TestRepliesCompareWithoutALeadingReasoningBlock: a reply that opens
// with a model's reasoning in a <think>…</think> block (DeepSeek-R1, QwQ,
// local models behind OpenAI-compatible servers) is resent by chat apps
// without it: that is the same turn, with the same print, as the reply
// memgate stored. Only one leading, well-formed block counts: any other
// difference, a block elsewhere or unclosed, or a user's message, still
// tells the two apart.
func TestRepliesCompareWithoutALeadingReasoningBlock(t *testing.T) {
	reply := func(s string) Message { return Message{Role: "assistant", Content: s} }
	for _, tt := range []struct {
		name     string
		stored   Message
		resent   Message
		sameTurn bool
	}{
		{"block stripped", reply("<think>\nThe user greets me.\n</think>\n\nHi there."), reply("Hi there."), true},
		{"block and white space around", reply("\n<think>hmm</think> \t\nHi there.\n"), reply("Hi there."), true},
		{"block resent as stored", reply("<think>hmm</think>\n\nHi"), reply("<think>hmm</think>\n\nHi"), true},
		{"empty block", reply("<think></think>\n\nHi"), reply("Hi"), true},
		{"another block, the same answer", reply("<think>a</think>Hi"), reply("<think>b</think>Hi"), true},
		{"block stripped, answer differing", reply("<think>hmm</think>\n\nHi there."), reply("Hi there!"), false},
		{"block not leading", reply("Sure. <think>hmm</think> Hi"), reply("Sure. Hi"), false},
		{"block not leading, dropped whole", reply("Sure. <think>hmm</think> Hi"), reply("Hi"), false},
		{"block never closed", reply("<think>hmm\n\nHi"), reply("Hi"), false},
		{"closing tag alone", reply("hmm</think>\n\nHi"), reply("Hi"), false},
		{"second block kept", reply("<think>a</think><think>b</think>Hi"), reply("Hi"), false},
		{"other tag", reply("<thinking>hmm</thinking>Hi"), reply("Hi"), false},
		{"tag in capitals", reply("<THINK>hmm</THINK>Hi"), reply("Hi"), false},
		{"user message", Message{Role: "user", Content: "<think>hmm</think>Hi"}, Message{Role: "user", Content: "Hi"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.stored.Fingerprint() == tt.resent.Fingerprint(); got != tt.sameTurn {
				t.Errorf("same fingerprint = %v, want %v", got, tt.sameTurn)
			}
			if got := tt.stored.Print() == tt.resent.Print(); got != tt.sameTurn {
				t.Errorf("same print = %v, want %v", got, tt.sameTurn)
			}
		})
	}
}

// TestAnswerLeavesOutALeadingReasoningBlock: what memgate shows a model or
// indexes of a stored reply is its answer, without the reasoning block it
// opens with (the same block ComparedContent ignores); any other message,
// and a reply without such a block, is its text as stored.
func TestAnswerLeavesOutALeadingReasoningBlock(t *testing.T) {
	for _, tt := range []struct {
		name string
		m    Message
		want string
	}{
		{"block", Message{Role: "assistant", Content: "<think>long reasoning</think>\n\nParis."}, "Paris."},
		{"white space before the block", Message{Role: "assistant", Content: "\n<think>a\nb</think> \tParis.\n"}, "Paris."},
		{"only a block", Message{Role: "assistant", Content: "<think>hmm</think>\n"}, ""},
		{"plain reply kept as stored", Message{Role: "assistant", Content: "\n Paris. \n"}, "\n Paris. \n"},
		{"block not leading", Message{Role: "assistant", Content: "Sure. <think>hmm</think> Hi"}, "Sure. <think>hmm</think> Hi"},
		{"block never closed", Message{Role: "assistant", Content: "<think>hmm\n\nHi"}, "<think>hmm\n\nHi"},
		{"second block kept", Message{Role: "assistant", Content: "<think>a</think><think>b</think>Hi"}, "<think>b</think>Hi"},
		{"user message", Message{Role: "user", Content: "<think>hmm</think>Hi"}, "<think>hmm</think>Hi"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Answer(); got != tt.want {
				t.Errorf("Answer() = %q, want %q", got, tt.want)
			}
		})
	}
}
