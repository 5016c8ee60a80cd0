package responses

import (
	"reflect"
	"testing"
)

// TestCreatedStream: fed a stream in pieces of any size, CreatedStream
// hands on the response's id once, as soon as the first event naming it
// is complete, and the output items' ids with the terminal event; deltas
// and item events are not read for ids.
func TestCreatedStream(t *testing.T) {
	stream := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"output\":[]}}\n\n" +
		"event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"resp_1\"}}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"msg_1\"}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\",\"response\":{\"id\":\"resp_x\"}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"output\":[{\"id\":\"msg_1\"},{\"id\":\"\"},{\"id\":\"fc_1\"}]}}\n\n"
	type call struct {
		c     Created
		final bool
	}
	want := []call{{Created{ID: "resp_1"}, false}, {Created{Items: []string{"msg_1", "fc_1"}}, true}}
	for _, size := range []int{1, 7, len(stream)} {
		var got []call
		s := NewCreatedStream(0, func(c Created, final bool) { got = append(got, call{c, final}) })
		for rest := stream; rest != ""; {
			n := min(size, len(rest))
			if _, err := s.Write([]byte(rest[:n])); err != nil {
				t.Fatal(err)
			}
			// The id is handed on with the piece that completes its event.
			if len(got) == 0 && len(stream)-len(rest)+n >= len("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"output\":[]}}\n\n") {
				t.Fatalf("pieces of %d: the response.created event passed without its id handed on", size)
			}
			rest = rest[n:]
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("pieces of %d: got %+v, want %+v", size, got, want)
		}
	}
}

// TestCreatedFromJSON: a whole reply's id and output items' ids; a reply
// naming no id is an error.
func TestCreatedFromJSON(t *testing.T) {
	c, err := CreatedFromJSON([]byte(`{"id":"resp_1","object":"response","output":[{"id":"rs_1","type":"reasoning"},{"id":"msg_1","type":"message"}]}`))
	if err != nil || !reflect.DeepEqual(c, Created{ID: "resp_1", Items: []string{"rs_1", "msg_1"}}) {
		t.Errorf("CreatedFromJSON = %+v, %v", c, err)
	}
	if c, err := CreatedFromJSON([]byte(`{"id":"conv_1","object":"conversation"}`)); err != nil || c.ID != "conv_1" || c.Items != nil {
		t.Errorf("a conversation: %+v, %v", c, err)
	}
	for _, b := range []string{`{"object":"response"}`, `[1]`, `not json`} {
		if _, err := CreatedFromJSON([]byte(b)); err == nil {
			t.Errorf("%s: no error", b)
		}
	}
}

// TestItemsFromJSON: the items a whole reply names — a response's output,
// a list's data — with its id when it gives one; no id is no error.
func TestItemsFromJSON(t *testing.T) {
	for _, tt := range []struct {
		body string
		want Created
	}{
		{`{"id":"resp_1","object":"response","status":"completed","output":[{"id":"msg_1"},{"id":""}]}`, Created{ID: "resp_1", Items: []string{"msg_1"}}},
		{`{"object":"list","data":[{"id":"msg_1","type":"message"},{"id":"fc_1"}],"has_more":false}`, Created{Items: []string{"msg_1", "fc_1"}}},
		{`{"id":"resp_1","object":"response","status":"queued","output":[]}`, Created{ID: "resp_1"}},
		{`{"object":"response.deleted","deleted":true}`, Created{}},
		// One item of a conversation (GET /v1/conversations/{id}/items/{item}),
		// whose output is its own: a string or an object, no list of items.
		{`{"type":"function_call_output","id":"fco_1","call_id":"call_1","output":"42"}`, Created{ID: "fco_1"}},
		{`{"type":"computer_call_output","id":"cuo_1","call_id":"call_1","output":{"type":"computer_screenshot","image_url":"data:"}}`, Created{ID: "cuo_1"}},
		{`{"type":"mcp_call","id":"mcp_1","output":null}`, Created{ID: "mcp_1"}},
	} {
		if c, err := ItemsFromJSON([]byte(tt.body)); err != nil || !reflect.DeepEqual(c, tt.want) {
			t.Errorf("%s: %+v, %v; want %+v", tt.body, c, err, tt.want)
		}
	}
	if _, err := ItemsFromJSON([]byte(`not json`)); err == nil {
		t.Error("not json: no error")
	}
}
