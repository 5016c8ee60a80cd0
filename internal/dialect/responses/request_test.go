package responses

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

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
