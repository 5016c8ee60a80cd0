package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/memory"
)

// roundTrip is a Responses request carrying a function-call round trip as
// items, as a client with store=false sends it.
const roundTrip = `{
  "model": "gpt-4.1", "store": false, "stream": true, "max_output_tokens": 500, "user": "u-42",
  "instructions": "You are a travel assistant.",
  "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
  "input": [
    {"role": "developer", "content": "Answer briefly."},
    {"type": "message", "role": "user", "content": [
      {"type": "input_text", "text": "Weather in Porto?"},
      {"type": "input_image", "image_url": "https://example.com/porto.jpg", "detail": "low"}
    ]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Need the weather tool."}], "encrypted_content": "gAAAA"},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Porto\"}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "18C, sunny"},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "It is 18C and sunny.", "annotations": []}]},
    {"role": "user", "content": "Thanks! Any museums?"}
  ]
}`

func TestParseRequest(t *testing.T) {
	tests := []struct{ name, body string }{
		{"round_trip", roundTrip},
		{"string_input_previous_response", `{"model":"gpt-4o","input":"And tomorrow?","previous_response_id":"resp_123"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			texts := make([]string, len(r.Messages))
			for i, m := range r.Messages {
				texts[i] = m.Role + ": " + m.Content
			}
			out, _ := json.Marshal(map[string]any{
				"model": r.Model, "stream": r.Stream, "max_tokens": r.MaxTokens, "user": r.User,
				"previous_response_id": r.PreviousResponseID, "messages": memory.Raws(r.Messages), "texts": texts,
			})
			dialecttest.Golden(t, "parse_"+tt.name, out, *update)
		})
	}
}

func TestParseRequestRejects(t *testing.T) {
	tests := []struct{ body, param string }{
		{`"x"`, ""},
		{`{"input":"x"}`, "model"},
		{`{"model":"m"}`, "input"},
		{`{"model":"m","input":5}`, "input"},
		{`{"model":"m","input":[5]}`, "input[0]"},
		{`{"model":"m","input":[{"content":"no role"}]}`, "input[0]"},
		{`{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input[0].role"},
		{`{"model":"m","input":"x","instructions":5}`, "instructions"},
		{`{"model":"m","input":"x","max_output_tokens":"lots"}`, "max_output_tokens"},
		{`{"model":"m","input":"x","previous_response_id":1}`, "previous_response_id"},
	}
	for _, tt := range tests {
		_, err := ParseRequest([]byte(tt.body))
		var fe *body.FieldError
		if !errors.Is(err, memory.ErrInvalid) || !errors.As(err, &fe) || fe.Param != tt.param {
			t.Errorf("ParseRequest(%s) = %v, want an invalid-input error naming %q", tt.body, err, tt.param)
		}
	}
}

// storedTurns is a stored conversation with a tool round trip.
func storedTurns(t *testing.T) []json.RawMessage {
	return []json.RawMessage{
		dialecttest.JSON(t, map[string]any{"role": "user", "content": "I moved to Porto."}),
		dialecttest.JSON(t, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": "call_a", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Porto"}`}},
			map[string]any{"id": "call_lost", "type": "function", "function": map[string]any{"name": "get_time", "arguments": `{}`}}}}),
		dialecttest.JSON(t, map[string]any{"role": "tool", "tool_call_id": "call_a", "content": "18C"}),
		dialecttest.JSON(t, map[string]any{"role": "tool", "tool_call_id": "call_stray", "content": "?"}),
		dialecttest.JSON(t, map[string]any{"role": "assistant", "content": "Welcome to Porto, 18C today.", "reasoning_content": "r"}),
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		block    string
		stored   bool
		keepFrom int
	}{
		{"string_input_new_only", `{"model":"gpt-4o","instructions":"Be kind.","input":"Where do I live?"}`, "Facts:\n- city: Porto", true, 0},
		{"previous_response_id_gets_no_recent_turns", `{"model":"gpt-4o","previous_response_id":"resp_1","input":[{"role":"user","content":"Where do I live?"}]}`, "Facts:\n- city: Porto", true, 0},
		{"string_input_only_memory_stays_string", `{"model":"gpt-4o","input":"Hi","store":true}`, "Facts:\n- likes tea", false, 0},
		{"instructions_array", `{"model":"gpt-4o","instructions":[{"role":"developer","content":"Be kind."}],"input":"Hi"}`, "Facts:\n- likes tea", false, 0},
		{"trimmed_history", roundTrip, "Summary: weather talk", false, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			var stored []json.RawMessage
			if tt.stored {
				stored = storedTurns(t)
			}
			out, err := r.Render(dialecttest.Prepared(r.Conversation, tt.block, stored, tt.keepFrom))
			if err != nil {
				t.Fatal(err)
			}
			dialecttest.Golden(t, "render_"+tt.name, out, *update)
		})
	}
}

// TestRenderBlocks renders the two memory blocks: the stable one joins
// the instructions (in user position, a user item opens the input), the
// recalled one is a developer (user) item right before the current
// question — in the instructions with previous_response_id and system
// position, where the provider would otherwise keep every request's.
func TestRenderBlocks(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		user   bool
		stored bool
	}{
		{"blocks_string_input", `{"model":"gpt-4o","instructions":"Be kind.","input":"Where do I live?"}`, false, true},
		{"blocks_user_position", `{"model":"gpt-4o","instructions":"Be kind.","input":[{"role":"developer","content":"Dev."},{"role":"user","content":"Where do I live?"}]}`, true, true},
		{"blocks_previous_response_id", `{"model":"gpt-4o","previous_response_id":"resp_1","input":[{"role":"user","content":"Where do I live?"}]}`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			var stored []json.RawMessage
			if tt.stored {
				stored = storedTurns(t)
			}
			p := dialecttest.PreparedBlocks(r.Conversation, "<memory>\nFacts:\n- city: Porto\n</memory>", "<memory>\nRecalled: Porto\n</memory>", tt.user, stored, 0)
			out, err := r.Render(p)
			if err != nil {
				t.Fatal(err)
			}
			dialecttest.Golden(t, "render_"+tt.name, out, *update)
		})
	}
}

// TestProviderConversationGetsNoStoredText: a request in a conversation
// of the Conversations API (conversation: an id or {"id": …}) has its
// history held by the provider, which adds every input item to that
// conversation for good. As with previous_response_id, stored turns are
// not prepended (each request would add the whole window to the
// provider's conversation again) and the recalled block joins the
// instructions (in input it would stay in the provider's conversation,
// erasures notwithstanding): the input goes as the client sent it.
func TestProviderConversationGetsNoStoredText(t *testing.T) {
	for _, conv := range []string{`"conv_1"`, `{"id":"conv_1"}`} {
		t.Run(conv, func(t *testing.T) {
			input := `[{"role":"user","content":"Where do I live?"}]`
			r, err := ParseRequest([]byte(`{"model":"gpt-4o","conversation":` + conv + `,"input":` + input + `}`))
			if err != nil {
				t.Fatal(err)
			}
			p := dialecttest.PreparedBlocks(r.Conversation, "<memory>\nFacts:\n- city: Porto\n</memory>", "<memory>\nRecalled: Porto\n</memory>", false, storedTurns(t), 0)
			out, err := r.Render(p)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Input        json.RawMessage `json:"input"`
				Instructions string          `json:"instructions"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if !jsonEqualBytes(got.Input, []byte(input)) {
				t.Errorf("input %s, want the client's %s", got.Input, input)
			}
			if !strings.Contains(got.Instructions, "Recalled: Porto") {
				t.Errorf("instructions %q, want the recalled block in them", got.Instructions)
			}
		})
	}
}

// jsonEqualBytes reports whether a and b hold equal JSON values.
func jsonEqualBytes(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// TestStates: the provider states a request names — the response it
// continues, the conversation it is in, by id or by object, the items it
// names by id alone — with the id each gives; a member holding no id
// names one with none. An item carrying its content is no reference.
func TestStates(t *testing.T) {
	resp := func(id string) memory.ProviderState { return memory.ProviderState{Kind: memory.StateResponse, ID: id} }
	conv := func(id string) memory.ProviderState {
		return memory.ProviderState{Kind: memory.StateConversation, ID: id}
	}
	item := func(id string) memory.ProviderState { return memory.ProviderState{Kind: memory.StateItem, ID: id} }
	for _, tt := range []struct {
		body string
		want []memory.ProviderState
	}{
		{`{"model":"m","input":"hi"}`, nil},
		{`{"model":"m","input":"hi","conversation":null}`, nil},
		{`{"model":"m","previous_response_id":"resp_1"}`, []memory.ProviderState{resp("resp_1")}},
		{`{"model":"m","input":"hi","conversation":"conv_1"}`, []memory.ProviderState{conv("conv_1")}},
		{`{"model":"m","input":"hi","conversation":{"id":"conv_1"}}`, []memory.ProviderState{conv("conv_1")}},
		{`{"model":"m","input":"hi","conversation":{"name":"x"}}`, []memory.ProviderState{conv("")}},
		{`{"model":"m","input":"hi","conversation":42}`, []memory.ProviderState{conv("")}},
		{`{"model":"m","input":"hi","previous_response_id":"resp_1","conversation":"conv_1"}`, []memory.ProviderState{resp("resp_1"), conv("conv_1")}},
		{`{"model":"m","input":[{"type":"item_reference","id":"msg_1"},{"role":"user","content":"hi"}]}`, []memory.ProviderState{item("msg_1")}},
		{`{"model":"m","input":[{"type":"item_reference"},{"type":"reasoning","id":"rs_1","summary":[]},` +
			`{"type":"reasoning","id":"rs_2","summary":[],"encrypted_content":"gAAA"},{"type":"message","id":"msg_2","role":"assistant","content":"ok"},` +
			`{"role":"user","content":"hi"}]}`, []memory.ProviderState{item(""), item("rs_1")}},
		// The provider reads members by their exact names; encoding/json
		// matches them in any case, and of two spellings the last wins.
		{`{"model":"m","input":[{"type":"item_reference","id":"msg_1","Type":"message","role":"user","content":"hi"}]}`, []memory.ProviderState{item("msg_1")}},
		{`{"model":"m","input":[{"type":"item_reference","id":"msg_1","ID":"msg_mine"}]}`, []memory.ProviderState{item("msg_1")}},
		{`{"model":"m","input":[{"type":"reasoning","id":"rs_1","ID":"","summary":[]}]}`, []memory.ProviderState{item("rs_1")}},
		{`{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[],"Encrypted_Content":"gAAA"}]}`, []memory.ProviderState{item("rs_1")}},
		{`{"model":"m","input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":""}]}`, []memory.ProviderState{item("rs_1")}},
		{`{"model":"m","input":[{"Type":"message","Role":"user","Content":"hi","id":"msg_1"}]}`, []memory.ProviderState{item("msg_1")}},
		{`{"model":"m","input":"hi","conversation":{"id":"conv_1","ID":"conv_mine"}}`, []memory.ProviderState{conv("conv_1")}},
	} {
		r, err := ParseRequest([]byte(tt.body))
		if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		if got := r.States(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: States() = %v, want %v", tt.body, got, tt.want)
		}
	}
}

// TestParseStateBody: the body of a fixed sub-path of the Responses API
// (input_tokens, compact) need give neither model nor input, and names
// states as a create body does; a body of the wrong shape still fails.
func TestParseStateBody(t *testing.T) {
	for _, tt := range []struct {
		body string
		want []memory.ProviderState
	}{
		{`{}`, nil},
		{`{"model":null,"input":null}`, nil},
		{`{"conversation":"conv_1"}`, []memory.ProviderState{{Kind: memory.StateConversation, ID: "conv_1"}}},
		{`{"model":"m","previous_response_id":"resp_1","input":[{"type":"item_reference","id":"msg_1"}]}`,
			[]memory.ProviderState{{Kind: memory.StateResponse, ID: "resp_1"}, {Kind: memory.StateItem, ID: "msg_1"}}},
	} {
		r, err := ParseStateBody([]byte(tt.body))
		if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		if got := r.States(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: States() = %v, want %v", tt.body, got, tt.want)
		}
	}
	for _, body := range []string{`[]`, `{"input":42}`, `{"previous_response_id":7}`} {
		if _, err := ParseStateBody([]byte(body)); err == nil {
			t.Errorf("%s: no error", body)
		}
	}
	if r, err := ParseStateBody([]byte(`{"conversation":{"id":"conv_1","id":"conv_2"}}`)); err != nil || r.Repeated() == nil {
		t.Errorf("a repeated member: %v, %v", r, err)
	}
}

// TestNoStore: store false asks the provider to keep nothing; true, null
// or absent keep the response.
func TestNoStore(t *testing.T) {
	for body, want := range map[string]bool{
		`{"model":"m","input":"hi","store":false}`: true,
		`{"model":"m","input":"hi","store":true}`:  false,
		`{"model":"m","input":"hi","store":null}`:  false,
		`{"model":"m","input":"hi"}`:               false,
	} {
		r, err := ParseRequest([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if r.NoStore != want {
			t.Errorf("%s: NoStore = %v, want %v", body, r.NoStore, want)
		}
	}
}

// manyItems returns a Responses body whose input holds n items, user and
// assistant messages in turn, of about size bytes in all.
func manyItems(n, size int) []byte {
	text := strings.Repeat("word ", (size/n-120)/5)
	var b strings.Builder
	b.WriteString(`{"model":"m","input":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if i%2 == 0 {
			b.WriteString(`{"type":"message","role":"user","content":[{"type":"input_text","text":"` + text + `"}]}`)
		} else {
			b.WriteString(`{"type":"message","id":"msg_` + strconv.Itoa(i) + `","role":"assistant","status":"completed","content":[{"type":"output_text","text":"` + text + `","annotations":[]}]}`)
		}
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkParseManyItems reads a 10 MB input of 20,000 items.
func BenchmarkParseManyItems(b *testing.B) {
	raw := manyItems(20_000, 10<<20)
	b.SetBytes(int64(len(raw)))
	defer reportCPU(b)()
	for b.Loop() {
		if _, err := ParseRequest(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// reportCPU starts counting the process's CPU time; the func it returns
// reports it per op (cpu-ns/op: unlike ns/op, the same on a machine
// other processes load).
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") }
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkItemReferencesManyItems reads a 10 MB Conversations API body
// of 20,000 items.
func BenchmarkItemReferencesManyItems(b *testing.B) {
	raw := bytes.Replace(manyItems(20_000, 10<<20), []byte(`"input":`), []byte(`"items":`), 1)
	b.SetBytes(int64(len(raw)))
	defer reportCPU(b)()
	for b.Loop() {
		if _, err := ParseItemsBody(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRepeatedMember: a body, an input item, a conversation object or a
// Conversations API item that gives a member twice by its exact name
// (once unescaped) is reported with the first such name, whatever its
// values hold; names that differ in case are two members to the
// provider, and a nested object's names are not the item's.
func TestRepeatedMember(t *testing.T) {
	for _, tt := range []struct {
		input string // the input member, or the conversation's when conv
		conv  bool
		body  string // the whole body, when not ""
		want  *RepeatedMember
	}{
		{input: `[{"type":"message","type":"item_reference","id":"msg_1"}]`, want: &RepeatedMember{"input[0]", "type"}},
		{input: `[{"role":"user","content":"hi"},{"type":"item_reference","id":"msg_mine","id":"msg_1"}]`, want: &RepeatedMember{"input[1]", "id"}},
		{input: `[{"type":"item_reference","id":"msg_1","\u0069d":"msg_mine"}]`, want: &RepeatedMember{"input[0]", "id"}},
		{input: `[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA","encrypted_content":""}]`, want: &RepeatedMember{"input[0]", "encrypted_content"}},
		{input: `[{"role":"user","content":"a, \"b\": {[c]}","role":"system"}]`, want: &RepeatedMember{"input[0]", "role"}},
		{input: `[{"role":"user","content":"x\\\\","role":"system"}]`, want: &RepeatedMember{"input[0]", "role"}},
		{input: `[{"role":"user","content":[{"type":"input_text","text":"x","text":"y"}]}]`},
		{input: `[{"type":"item_reference","id":"msg_1","ID":"msg_2"}]`},
		{input: `[{"type":"message","Type":"message","role":"user","Role":"user","content":"hi"}]`},
		{input: `[{"role":"user","content":"{\"role\":\"system\",\"role\":1}, \\\\\", ,"},{"role":"user","content":{}}]`},
		{input: `[{"role":"user","content":"hi","x":[{"a":1,"a":2},[1,2,3]],"y":{}}]`},
		{input: `{"id":"conv_1","id":"conv_mine"}`, conv: true, want: &RepeatedMember{"conversation", "id"}},
		{input: `{"id":"conv_1","ID":"conv_mine"}`, conv: true},
		{body: `{"model":"m","previous_response_id":"resp_1","input":"hi","previous_response_id":"resp_mine"}`, want: &RepeatedMember{"", "previous_response_id"}},
		{body: `{"model":"m","conversation":"conv_1","input":"hi","conversation":{"id":"conv_mine"}}`, want: &RepeatedMember{"", "conversation"}},
		{body: `{"model":"m","input":[{"type":"item_reference","id":"msg_1"}],"\u0069nput":"hi"}`, want: &RepeatedMember{"", "input"}},
		{body: `{"model":"m","previous_response_id":"resp_1","Previous_Response_ID":"resp_mine","input":"hi"}`},
	} {
		b := `{"model":"m","input":` + tt.input + `}`
		if tt.conv {
			b = `{"model":"m","input":"hi","conversation":` + tt.input + `}`
		}
		if tt.body != "" {
			b = tt.body
		}
		r, err := ParseRequest([]byte(b))
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if got := r.Repeated(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Repeated() = %v, want %v", b, got, tt.want)
		}
		if tt.conv || tt.body != "" {
			continue
		}
		var want error
		if tt.want != nil {
			want = &RepeatedMember{strings.Replace(tt.want.Param, "input", "items", 1), tt.want.Key}
		}
		if _, err := ParseItemsBody([]byte(`{"items":` + tt.input + `}`)); !reflect.DeepEqual(err, want) {
			t.Errorf("ParseItemsBody of %s: %v, want %v", tt.input, err, want)
		}
	}
}

// BenchmarkMemberCount is what members adds to each item of
// BenchmarkParseManyItems and BenchmarkItemReferencesManyItems: counting
// its members.
func BenchmarkMemberCount(b *testing.B) {
	var items []json.RawMessage
	if err := json.Unmarshal(bytes.TrimSuffix(bytes.TrimPrefix(manyItems(20_000, 10<<20), []byte(`{"model":"m","input":`)), []byte(`}`)), &items); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		for _, it := range items {
			memberCount(it)
		}
	}
}

// TestItemReferencesRepeatedMember: a Conversations API body that gives
// a member twice is reported with it, as the body (param "").
func TestItemReferencesRepeatedMember(t *testing.T) {
	_, err := ParseItemsBody([]byte(`{"items":[{"type":"item_reference","id":"msg_1"}],"items":[]}`))
	if want := (&RepeatedMember{"", "items"}); !reflect.DeepEqual(err, error(want)) {
		t.Errorf("ParseItemsBody: %v, want %v", err, want)
	}
}

// TestMemberCount: memberCount counts an object's members as a JSON
// decoder reads them, whatever its strings and nested values hold.
func TestMemberCount(t *testing.T) {
	for _, obj := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":{}}`, `{"a":[]}`, `{"":""}`,
		`{"a":"x","b":"y"}`, `{"a,b":"c,d","e":[1,{"f":2,"g":3}],"h":{"i":[],"j":{}}}`,
		`{"a":"\"","b":"\\","c":"\\\"","d":"\\\\","e":"\u0022,\u005c"}`,
		`{"\"a":1,"b\\":"}{][,"}`, "{\n\t\"a\" : null ,\n\t\"b\" : true\n}",
	} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(obj), &m); err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		if got := memberCount([]byte(obj)); got != len(m) {
			t.Errorf("memberCount(%s) = %d, want %d", obj, got, len(m))
		}
	}
}

// decoderMembers counts the members of the JSON object raw the way
// encoding/json's Decoder reads them, repeats included: the reference
// memberCount's byte scan is held to.
func decoderMembers(t testing.TB, raw []byte) int {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s: not an object: %v %v", raw, tok, err)
	}
	n := 0
	for dec.More() {
		if _, err := dec.Token(); err != nil { // the name
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// randomJSON writes a random JSON value of at most depth levels to b:
// strings with escapes, quotes, commas and brackets inside, nested objects
// and arrays, and objects that repeat a name.
func randomJSON(r *rand.Rand, b *bytes.Buffer, depth int) {
	str := func() {
		parts := []string{`a`, `,`, `{`, `}`, `[`, `]`, `:`, `\"`, `\\`, `\\\"`, `\u0022`, `\u005c`, `\n`, ` `, `é`}
		b.WriteByte('"')
		for range r.IntN(5) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		b.WriteByte('"')
	}
	switch k := r.IntN(6); {
	case depth <= 0 || k == 0:
		str()
	case k == 1:
		b.WriteString([]string{"1", "-2.5e3", "true", "false", "null"}[r.IntN(5)])
	case k == 2:
		b.WriteByte('[')
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString(" , ")
			}
			randomJSON(r, b, depth-1)
		}
		b.WriteByte(']')
	default:
		b.WriteString("{\n")
		for i := range r.IntN(5) {
			if i > 0 {
				b.WriteByte(',')
			}
			if r.IntN(3) == 0 {
				b.WriteString(`"id"`) // repeated names
			} else {
				str()
			}
			b.WriteString(" : ")
			randomJSON(r, b, depth-1)
		}
		b.WriteString("\t}")
	}
}

// TestMemberCountMatchesDecoder: the byte scan counts the members of
// random objects (escapes, brackets and commas in strings, nesting,
// repeated names) exactly as encoding/json's Decoder reads them.
func TestMemberCountMatchesDecoder(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 1))
	checked := 0
	for range 5000 {
		var b bytes.Buffer
		randomJSON(r, &b, 4)
		raw := b.Bytes()
		if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
			continue
		}
		checked++
		if got, want := memberCount(raw), decoderMembers(t, raw); got != want {
			t.Fatalf("memberCount(%s) = %d, encoding/json reads %d", raw, got, want)
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d random objects checked", checked)
	}
}

// FuzzMemberCount: on any JSON object, the byte scan and encoding/json's
// Decoder count the same members.
func FuzzMemberCount(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"a":"\"","b":"\\","c":"\\\"","d":"\\\\"}`, `{"\"a":1,"b\\":"}{][,"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
			return
		}
		if got, want := memberCount(raw), decoderMembers(t, raw); got != want {
			t.Fatalf("memberCount(%s) = %d, encoding/json reads %d", raw, got, want)
		}
	})
}

// TestReplyFromJSONNotDone: a background response queued or in progress
// holds no answer yet (ErrNotDone); a cancelled one holds none
// (ErrEnded, a memory.ErrInvalid); one with no status is done.
func TestReplyFromJSONNotDone(t *testing.T) {
	for status, want := range map[string]error{"queued": ErrNotDone, "in_progress": ErrNotDone, "cancelled": ErrEnded, "failed": ErrEnded} {
		_, _, err := ReplyFromJSON([]byte(`{"id":"resp_1","object":"response","status":"` + status + `","background":true,"output":[],"usage":null}`))
		if !errors.Is(err, want) {
			t.Errorf("%s: err %v, want %v", status, err, want)
		}
	}
	msg, _, err := ReplyFromJSON([]byte(`{"id":"resp_1","object":"response","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}]}`))
	if err != nil || msg.Content != "hi" {
		t.Errorf("no status: %q, %v", msg.Content, err)
	}
}
