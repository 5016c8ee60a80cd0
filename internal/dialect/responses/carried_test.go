package responses

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/memory"
)

// TestCarriedIDs: an input item that gives an id beside its content —
// a message of any role, a function call or its output, a tool's call or
// output whose id is optional — carries it; an item named by id alone
// (States), a reasoning item with its encrypted content, an item whose id
// the API requires, an empty or non-string id and a string input carry
// none.
func TestCarriedIDs(t *testing.T) {
	item := func(id string) memory.ProviderState { return memory.ProviderState{Kind: memory.StateItem, ID: id} }
	for _, tt := range []struct {
		input string
		want  []memory.ProviderState
	}{
		{`"hi"`, nil},
		{`[{"role":"user","content":"hi"}]`, nil},
		{`[{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"ok"}]},{"role":"user","id":"msg_2","content":"hi"}]`,
			[]memory.ProviderState{item("msg_1"), item("msg_2")}},
		{`[{"type":"function_call","id":"fc_1","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","id":"fco_1","call_id":"c1","output":"x"}]`,
			[]memory.ProviderState{item("fc_1"), item("fco_1")}},
		{`[{"type":"computer_call_output","id":"cuo_1","call_id":"c1","output":{}},{"type":"custom_tool_call","id":"ctc_1","call_id":"c2","name":"f","input":"x"},{"type":"mcp_approval_response","id":"mcpr_1","approval_request_id":"a","approve":true}]`,
			[]memory.ProviderState{item("cuo_1"), item("ctc_1"), item("mcpr_1")}},
		// Named by id alone: States' (item references).
		{`[{"type":"item_reference","id":"msg_1"},{"type":"reasoning","id":"rs_1","summary":[]}]`, nil},
		// Its content is the encrypted blob issued for that id.
		{`[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"}]`, nil},
		// The API requires their id: dropping it breaks the request
		// (RequiredIDs).
		{`[{"type":"web_search_call","id":"ws_1","status":"completed"},{"type":"computer_call","id":"cu_1","call_id":"c","action":{},"pending_safety_checks":[],"status":"completed"}]`, nil},
		{`[{"type":"message","id":"","role":"user","content":"hi"},{"type":"message","id":7,"role":"user","content":"hi"}]`, nil},
		// Exact names, as the provider reads them.
		{`[{"type":"message","ID":"msg_1","role":"user","content":"hi"}]`, nil},
		{`[{"type":"message","\u0069d":"msg_1","role":"user","content":"hi"}]`, []memory.ProviderState{item("msg_1")}},
	} {
		r, err := ParseRequest([]byte(`{"model":"m","input":` + tt.input + `}`))
		if err != nil {
			t.Fatalf("%s: %v", tt.input, err)
		}
		if got := r.CarriedIDs(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: CarriedIDs() = %v, want %v", tt.input, got, tt.want)
		}
	}
}

// TestDropIDs: the items whose carried id is dropped go upstream without
// their id member, every other member as sent; the other items and the
// body's other members keep their bytes; what memory reads of the input
// is unchanged, and Render works from the items without the dropped ids.
func TestDropIDs(t *testing.T) {
	in := `{ "model" : "m", "store":true,
  "input": [
    {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "Your pin is 1234.", "annotations": []}]},
    {"type": "function_call", "call_id": "c1", "id": "fc_1", "name": "f", "arguments": "{\"id\":\"x\"}"},
    {"type": "function_call_output", "call_id": "c1", "output": "ok", "id": "fco_1"},
    {"type": "item_reference", "id": "msg_0"},
    {"role": "user", "content": "And?"}
  ], "tools": [ {"type":"function","name":"f"} ]}`
	r, err := ParseRequest([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	msgs := r.Messages
	if got := len(r.CarriedIDs()); got != 3 {
		t.Fatalf("CarriedIDs: %d, want 3", got)
	}
	out, err := r.DropIDs([]bool{true, false, true})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Model json.RawMessage   `json:"model"`
		Store json.RawMessage   `json:"store"`
		Input []json.RawMessage `json:"input"`
		Tools json.RawMessage   `json:"tools"`
	}
	if err := json.Unmarshal(out, &body); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := []string{
		`{"type":"message","role":"assistant","content":[{"type": "output_text", "text": "Your pin is 1234.", "annotations": []}]}`,
		`{"type": "function_call", "call_id": "c1", "id": "fc_1", "name": "f", "arguments": "{\"id\":\"x\"}"}`,
		`{"type":"function_call_output","call_id":"c1","output":"ok"}`,
		`{"type": "item_reference", "id": "msg_0"}`,
		`{"role": "user", "content": "And?"}`,
	}
	if len(body.Input) != len(want) {
		t.Fatalf("input: %s", out)
	}
	for i, w := range want {
		if string(body.Input[i]) != w {
			t.Errorf("input[%d] = %s, want %s", i, body.Input[i], w)
		}
	}
	if string(body.Model) != `"m"` || string(body.Store) != `true` || string(body.Tools) != `[ {"type":"function","name":"f"} ]` {
		t.Errorf("other members changed: %s", out)
	}
	if !reflect.DeepEqual(r.Messages, msgs) {
		t.Errorf("messages changed: %v, want %v", r.Messages, msgs)
	}
	rendered, err := r.Render(dialecttest.Prepared(r.Conversation, "Memory.", nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rendered), `"msg_1"`) || strings.Contains(string(rendered), `"fco_1"`) || !strings.Contains(string(rendered), `"fc_1"`) {
		t.Errorf("Render after DropIDs: %s", rendered)
	}
	// Nothing dropped: the body as sent.
	r, _ = ParseRequest([]byte(in))
	if out, err := r.DropIDs([]bool{false, false, false}); err != nil || string(out) != in {
		t.Errorf("DropIDs(none) = %s, %v; want the body as sent", out, err)
	}
}

// BenchmarkDropIDsManyItems reads the 10 MB input of
// BenchmarkParseManyItems and drops the ids of its 10,000 assistant
// messages: what a request naming none of its ids as the caller's costs.
func BenchmarkDropIDsManyItems(b *testing.B) {
	raw := manyItems(20_000, 10<<20)
	b.SetBytes(int64(len(raw)))
	defer reportCPU(b)()
	for b.Loop() {
		r, err := ParseRequest(raw)
		if err != nil {
			b.Fatal(err)
		}
		drop := make([]bool, len(r.CarriedIDs()))
		for i := range drop {
			drop[i] = true
		}
		if _, err := r.DropIDs(drop); err != nil {
			b.Fatal(err)
		}
	}
}

// TestItemsBodyDropIDs: a Conversations API body's items carry ids as a
// create body's input does; those dropped leave their items, the rest of
// the body as sent.
func TestItemsBodyDropIDs(t *testing.T) {
	in := `{"items": [{"type":"item_reference","id":"msg_0"}, {"type":"message","id":"msg_1","role":"user","content":"hi"}], "metadata": {"a": 1}}`
	b, err := ParseItemsBody([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	item := func(id string) memory.ProviderState { return memory.ProviderState{Kind: memory.StateItem, ID: id} }
	if got := b.States(); !reflect.DeepEqual(got, []memory.ProviderState{item("msg_0")}) {
		t.Errorf("States() = %v", got)
	}
	if got := b.CarriedIDs(); !reflect.DeepEqual(got, []memory.ProviderState{item("msg_1")}) {
		t.Errorf("CarriedIDs() = %v", got)
	}
	if out, err := b.DropIDs([]bool{false}); err != nil || string(out) != in {
		t.Errorf("DropIDs(none) = %s, %v", out, err)
	}
	out, err := b.DropIDs([]bool{true})
	if want := `{"items":[{"type":"item_reference","id":"msg_0"},{"type":"message","role":"user","content":"hi"}],"metadata":{"a": 1}}`; err != nil || string(out) != want {
		t.Errorf("DropIDs = %s, %v; want %s", out, err, want)
	}
}

// TestRequiredIDs: the id of an item whose type requires one (a built-in
// tool call's) and the approval request an MCP approval answers are
// required ids, each with the member that gives it; an optional id, an
// item named by id alone, an empty or non-string id are not. A
// Conversations API body's items give them as a create body's input does.
func TestRequiredIDs(t *testing.T) {
	for _, tt := range []struct {
		input string
		want  []RequiredID
	}{
		{`[{"role":"user","content":"hi"},{"type":"web_search_call","id":"ws_1","status":"completed"}]`, []RequiredID{{"ws_1", "input[1].id"}}},
		{`[{"type":"computer_call","id":"cu_1","call_id":"c","action":{},"pending_safety_checks":[],"status":"completed"},` +
			`{"type":"computer_call_output","id":"cuo_1","call_id":"c","output":{}}]`, []RequiredID{{"cu_1", "input[0].id"}}},
		{`[{"type":"mcp_list_tools","id":"mcpl_1","server_label":"s","tools":[]},{"type":"mcp_approval_request","id":"mcpr_1","name":"f","arguments":"{}","server_label":"s"},` +
			`{"type":"mcp_approval_response","id":"mcpa_1","approval_request_id":"mcpr_1","approve":true},{"type":"mcp_call","id":"mcp_1","name":"f","arguments":"{}","server_label":"s"}]`,
			[]RequiredID{{"mcpl_1", "input[0].id"}, {"mcpr_1", "input[1].id"}, {"mcpr_1", "input[2].approval_request_id"}, {"mcp_1", "input[3].id"}}},
		{`[{"type":"file_search_call","id":"fs_1","queries":[],"status":"completed"},{"type":"image_generation_call","id":"ig_1","result":null,"status":"completed"},` +
			`{"type":"code_interpreter_call","id":"ci_1","code":"","container_id":"c","outputs":[],"status":"completed"},{"type":"local_shell_call","id":"lsh_1","call_id":"c","action":{},"status":"completed"},` +
			`{"type":"local_shell_call_output","id":"lsho_1","output":"x"}]`,
			[]RequiredID{{"fs_1", "input[0].id"}, {"ig_1", "input[1].id"}, {"ci_1", "input[2].id"}, {"lsh_1", "input[3].id"}, {"lsho_1", "input[4].id"}}},
		// Optional ids are carried (CarriedIDs), references are States'.
		{`[{"type":"message","id":"msg_1","role":"user","content":"hi"},{"type":"item_reference","id":"msg_0"},{"type":"reasoning","id":"rs_1","summary":[]}]`, nil},
		{`[{"type":"web_search_call","id":"","status":"completed"},{"type":"web_search_call","id":7,"status":"completed"},{"type":"web_search_call","ID":"ws_1","status":"completed"}]`, nil},
	} {
		r, err := ParseRequest([]byte(`{"model":"m","input":` + tt.input + `}`))
		if err != nil {
			t.Fatalf("%s: %v", tt.input, err)
		}
		if got := r.RequiredIDs(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: RequiredIDs() = %v, want %v", tt.input, got, tt.want)
		}
		b, err := ParseItemsBody([]byte(`{"items":` + tt.input + `}`))
		if err != nil {
			t.Fatalf("%s: %v", tt.input, err)
		}
		var want []RequiredID
		for _, w := range tt.want {
			want = append(want, RequiredID{w.ID, "items" + strings.TrimPrefix(w.Param, "input")})
		}
		if got := b.RequiredIDs(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: ItemsBody.RequiredIDs() = %v, want %v", tt.input, got, want)
		}
	}
}
