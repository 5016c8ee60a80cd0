package responses

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/body"
)

// TestCreatedStream: fed a stream in pieces of any size, CreatedStream
// hands on the response's id once, as soon as the first event naming it
// is complete, an output item's id with the first output_item event
// naming it, and the terminal event's output items not handed on yet;
// deltas are not read for ids. An untyped event is told by its data.
func TestCreatedStream(t *testing.T) {
	created := "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"output\":[]}}\n\n"
	added := "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"msg_1\"}}\n\n"
	stream := created +
		"event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":{\"id\":\"resp_1\"}}\n\n" +
		added +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\",\"response\":{\"id\":\"resp_x\"},\"item\":{\"id\":\"x_1\"}}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"id\":\"msg_1\"}}\n\n" +
		"data: {\"type\":\"response.output_item.done\",\"item\":{\"id\":\"ws_1\"}}\n\n" +
		"data: {\"type\":\"response.output_text.delta\",\"item\":{\"id\":\"x_2\"}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"output\":[{\"id\":\"msg_1\"},{\"id\":\"\"},{\"id\":\"ws_1\"},{\"id\":\"fc_1\"}]}}\n\n"
	type call struct {
		c     Created
		final bool
	}
	want := []call{{Created{ID: "resp_1"}, false}, {Created{Items: []string{"msg_1"}}, false}, {Created{Items: []string{"ws_1"}}, false},
		{Created{Items: []string{"fc_1"}}, true}}
	for _, size := range []int{1, 7, len(stream)} {
		var got []call
		s := NewCreatedStream(0, func(c Created, final bool) { got = append(got, call{c, final}) })
		for rest := stream; rest != ""; {
			n := min(size, len(rest))
			if _, err := s.Write([]byte(rest[:n])); err != nil {
				t.Fatal(err)
			}
			// Each id is handed on with the piece that completes its event.
			at := len(stream) - len(rest) + n
			if len(got) == 0 && at >= len(created) || len(got) < 2 && at >= strings.Index(stream, added)+len(added) {
				t.Fatalf("pieces of %d: an event passed without its id handed on (%+v)", size, got)
			}
			rest = rest[n:]
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("pieces of %d: got %+v, want %+v", size, got, want)
		}
	}
}

// TestCreatedStreamLimit: a stream of any length is read; an event that
// may name what the reply created larger than the limit stops the
// reading (every later Write fails), what it and later events name never
// handed on; a larger event of an item's content (a partial image) is
// skipped.
func TestCreatedStreamLimit(t *testing.T) {
	big := strings.Repeat("A", 1<<10)
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	head := ev("response.created", `{"type":"response.created","response":{"id":"resp_1"}}`) +
		ev("response.output_item.added", `{"type":"response.output_item.added","item":{"id":"ig_1"}}`) +
		ev("response.image_generation_call.partial_image", `{"type":"response.image_generation_call.partial_image","item_id":"ig_1","partial_image_b64":"`+big+`"}`)
	tail := ev("response.output_item.added", `{"type":"response.output_item.added","item":{"id":"msg_1"}}`)
	for _, tt := range []struct {
		name, stream string
		want         []string // ids handed on
		fails        bool
	}{
		{"within", head + ev("response.output_item.done", `{"type":"response.output_item.done","item":{"id":"ig_1","result":"AA"}}`) + tail, []string{"resp_1", "ig_1", "msg_1"}, false},
		{"an item event over", head + ev("response.output_item.added", `{"type":"response.output_item.added","item":{"id":"ig_2"}}`) +
			ev("response.output_item.added", `{"type":"response.output_item.added","item":{"id":"ig_3","result":"`+big+`"}}`) + tail, []string{"resp_1", "ig_1", "ig_2"}, true},
		// The item a finished item's event names was announced (added)
		// before it: an image over the limit in it is skipped, and the
		// items after it are still bound (a stateless client sends each
		// back with its id, which must be its own).
		{"a finished item's event over", head + ev("response.output_item.done", `{"type":"response.output_item.done","item":{"id":"ig_1","result":"`+big+`"}}`) +
			ev("response.output_item.added", `{"type":"response.output_item.added","item":{"id":"ig_2"}}`) + tail, []string{"resp_1", "ig_1", "ig_2", "msg_1"}, false},
		{"an unannounced finished item's event over", head + ev("response.output_item.done", `{"type":"response.output_item.done","item":{"id":"ig_9","result":"`+big+`"}}`) + tail, []string{"resp_1", "ig_1", "msg_1"}, false},
		{"an untyped event over", head + "data: {\"type\":\"response.image_generation_call.partial_image\",\"b64\":\"" + big + "\"}\n\n" + tail, []string{"resp_1", "ig_1"}, true},
		{"a terminal event over", head + ev("response.completed", `{"type":"response.completed","response":{"id":"resp_1","output":[{"id":"ig_1","result":"`+big+`"}]}}`), []string{"resp_1", "ig_1"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			s := NewCreatedStream(512, func(c Created, final bool) {
				if c.ID != "" {
					got = append(got, c.ID)
				}
				got = append(got, c.Items...)
			})
			var err error
			for rest := tt.stream; rest != "" && err == nil; rest = rest[min(100, len(rest)):] {
				_, err = s.Write([]byte(rest[:min(100, len(rest))]))
			}
			if (err != nil) != tt.fails || !slices.Equal(got, tt.want) {
				t.Errorf("handed on %v (err %v), want %v (fails %v)", got, err, tt.want, tt.fails)
			}
		})
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

// createdReplies are whole replies of the shapes CreatedReader reads:
// a response (its id, output items), a list (data items), members in any
// order, spaces, nested lists that name nothing, an output that is no
// list.
var createdReplies = []string{
	`{"id":"resp_1","object":"response","output":[{"id":"rs_1","type":"reasoning","summary":[]},{"id":"msg_1","type":"message","content":[{"id":"x","text":"hi"}]}],"usage":{"output":[{"id":"no"}]}}`,
	`{"object":"list","data":[{"type":"message","id":"msg_a"},{"id":""},{"type":"function_call_output","id":"fco_1","output":"[{\"id\":\"no\"}]"}],"has_more":false}`,
	` { "output" : [ ] , "ID" : "resp_2" , "data" : {"id":"no","output":[{"id":"no"}]} , "Output": [ {"id":"msg_2"} , null ] } `,
	`{"id":"conv_1","object":"conversation"}`,
	`{"id":"fco_9","type":"function_call_output","output":"42"}`,
}

// TestCreatedReader: relaying a whole reply in reads of any size,
// CreatedReader gives the reply byte for byte and hands on what
// ItemsFromJSON reads of it, each id before any byte naming it is read
// from it, then final; it holds no more than its bound.
func TestCreatedReader(t *testing.T) {
	for _, reply := range createdReplies {
		want, err := ItemsFromJSON([]byte(reply))
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{1, 5, 64, len(reply)} {
			var handed Created
			finals := 0
			r := NewCreatedReader(strings.NewReader(reply), 256, 1<<20, func(c Created, final bool) {
				if c.ID != "" {
					handed.ID = c.ID
				}
				handed.Items = append(handed.Items, c.Items...)
				if final {
					finals++
				}
			}, func(err error) { t.Errorf("%s: %v", reply, err) })
			var out []byte
			for {
				p := make([]byte, size)
				n, err := r.Read(p)
				out = append(out, p[:n]...)
				// Every id whose bytes were read out was handed on.
				for _, id := range append([]string{want.ID}, want.Items...) {
					if i := strings.Index(reply, `"`+id+`"`); id != "" && i >= 0 && i+len(id)+2 <= len(out) &&
						handed.ID != id && !slices.Contains(handed.Items, id) {
						t.Fatalf("%s in reads of %d: %q read out (%d bytes) before it was handed on", reply, size, id, len(out))
					}
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if string(out) != reply || finals != 1 || handed.ID != want.ID || !slices.Equal(handed.Items, want.Items) {
				t.Errorf("%s in reads of %d: %s, handed on %+v (%d finals); want %+v once", reply, size, out, handed, finals, want)
			}
		}
	}
}

// TestCreatedReaderBounded: a reply far larger than the bound — many
// items, each within it — is read whole, every item's id handed on, the
// bytes held never past the bound; a value larger than the bound, a
// reply larger than the total or that is no object stops the reading
// (fail) with what was read whole before it handed on, and the reply is
// still relayed byte for byte.
func TestCreatedReaderBounded(t *testing.T) {
	const limit = 4 << 10
	var b strings.Builder
	b.WriteString(`{"id":"resp_big","output":[`)
	var ids []string
	for i := range 2000 {
		if i > 0 {
			b.WriteByte(',')
		}
		id := fmt.Sprintf("ig_%d", i)
		ids = append(ids, id)
		fmt.Fprintf(&b, `{"id":%q,"type":"image_generation_call","result":%q}`, id, strings.Repeat("A", 3<<10))
	}
	b.WriteString(`]}`)
	reply := b.String()
	var handed []string
	r := NewCreatedReader(strings.NewReader(reply), limit, int64(len(reply)), func(c Created, final bool) { handed = append(handed, c.Items...) },
		func(err error) { t.Errorf("stopped: %v", err) })
	var out []byte
	held := 0
	for {
		p := make([]byte, 1000)
		n, err := r.Read(p)
		out = append(out, p[:n]...)
		held = max(held, r.Held())
		if err == io.EOF {
			break
		}
	}
	if string(out) != reply || !slices.Equal(handed, ids) {
		t.Errorf("a %d-byte reply: relayed %d bytes, %d ids handed on; want it whole and %d", len(reply), len(out), len(handed), len(ids))
	}
	if bound := body.FlushBytes + 2*(limit+1); held > bound {
		t.Errorf("held %d bytes at once, want at most %d", held, bound)
	}

	over := `{"id":"resp_1","output":[{"id":"a"},{"id":"b","result":"` + strings.Repeat("A", 2*limit) + `"},{"id":"c"}]}`
	for _, tt := range []struct {
		reply string
		want  []string
		total int64
	}{{over, []string{"resp_1", "a"}, 1 << 20}, {`[{"id":"a"}]`, nil, 1 << 20}, {`not json`, nil, 1 << 20}, {``, nil, 1 << 20},
		{reply, append([]string{"resp_big"}, ids[:2]...), 2 * 3200}, // past total: its first two items read whole
	} {
		var got []string
		var stopped error
		r := NewCreatedReader(strings.NewReader(tt.reply), limit, tt.total, func(c Created, final bool) {
			if final {
				t.Errorf("%.40s: read whole", tt.reply)
			}
			if c.ID != "" {
				got = append(got, c.ID)
			}
			got = append(got, c.Items...)
		}, func(err error) { stopped = err })
		out, err := io.ReadAll(r)
		if err != nil || string(out) != tt.reply || stopped == nil || !slices.Equal(got, tt.want) {
			t.Errorf("%.40s: relayed %d bytes (%v), stopped %v, handed on %v; want it whole, stopped, %v", tt.reply, len(out), err, stopped, got, tt.want)
		}
	}
}

// BenchmarkCreatedReader relays a 32 MiB reply of eight 4 MB images
// through CreatedReader: what binding a large reply's ids costs a byte.
func BenchmarkCreatedReader(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"id":"resp_big","output":[`)
	for i := range 8 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":"ig_%d","type":"image_generation_call","result":%q}`, i, strings.Repeat("A", 4_000_000))
	}
	sb.WriteString(`]}`)
	reply := sb.String()
	b.SetBytes(int64(len(reply)))
	for b.Loop() {
		r := NewCreatedReader(strings.NewReader(reply), 4<<20, 64<<20, func(Created, bool) {}, func(err error) { b.Fatal(err) })
		if _, err := io.Copy(io.Discard, struct{ io.Reader }{r}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreatedStream: a streamed image generation's reply of some
// 12 MB (two partial images, the image in output_item.done and again in
// response.completed), read as it is relayed in 32 KiB pieces.
func BenchmarkCreatedStream(b *testing.B) {
	image := strings.Repeat("A", 3_000_000)
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	stream := ev("response.created", `{"type":"response.created","response":{"id":"resp_1","output":[]}}`) +
		ev("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"id":"ig_1","type":"image_generation_call"}}`) +
		ev("response.image_generation_call.partial_image", `{"type":"response.image_generation_call.partial_image","item_id":"ig_1","partial_image_b64":"`+image+`"}`) +
		ev("response.image_generation_call.partial_image", `{"type":"response.image_generation_call.partial_image","item_id":"ig_1","partial_image_b64":"`+image+`"}`) +
		ev("response.output_item.done", `{"type":"response.output_item.done","output_index":0,"item":{"id":"ig_1","type":"image_generation_call","result":"`+image+`"}}`) +
		ev("response.completed", `{"type":"response.completed","response":{"id":"resp_1","output":[{"id":"ig_1","type":"image_generation_call","result":"`+image+`"}]}}`)
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		s := NewCreatedStream(4<<20, func(Created, bool) {})
		for rest := stream; rest != ""; rest = rest[min(32<<10, len(rest)):] {
			if _, err := s.Write([]byte(rest[:min(32<<10, len(rest))])); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// TestCreatedContainers: the containers a reply's items ran in (a code
// interpreter call's container_id) are read with the items' ids, from a
// whole reply, a reply read as it is relayed and a stream (each handed
// on once, though several events name it).
func TestCreatedContainers(t *testing.T) {
	const reply = `{"id":"resp_1","object":"response","output":[` +
		`{"id":"ci_1","type":"code_interpreter_call","container_id":"cntr_1","code":"print(1)"},` +
		`{"id":"ci_2","type":"code_interpreter_call","container_id":"cntr_1","code":"print(2)"},` +
		`{"id":"msg_1","type":"message","content":[]}]}`
	want := Created{ID: "resp_1", Items: []string{"ci_1", "ci_2", "msg_1"}, Containers: []string{"cntr_1", "cntr_1"}}
	if c, err := CreatedFromJSON([]byte(reply)); err != nil || !reflect.DeepEqual(c, want) {
		t.Errorf("CreatedFromJSON = %+v, %v; want %+v", c, err, want)
	}
	var relayed Created
	r := NewCreatedReader(strings.NewReader(reply), 256, 1<<20, func(c Created, final bool) {
		relayed.Items = append(relayed.Items, c.Items...)
		relayed.Containers = append(relayed.Containers, c.Containers...)
	}, func(err error) { t.Errorf("stopped: %v", err) })
	if _, err := io.ReadAll(r); err != nil || !slices.Equal(relayed.Containers, want.Containers) || !slices.Equal(relayed.Items, want.Items) {
		t.Errorf("CreatedReader handed on %+v, %v; want the items and containers of %+v", relayed, err, want)
	}
	stream := "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"id\":\"ci_1\",\"type\":\"code_interpreter_call\",\"container_id\":\"cntr_1\"}}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"id\":\"ci_1\",\"type\":\"code_interpreter_call\",\"container_id\":\"cntr_1\"}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":" + reply + "}\n\n"
	var streamed Created
	s := NewCreatedStream(1<<20, func(c Created, final bool) {
		streamed.Items = append(streamed.Items, c.Items...)
		streamed.Containers = append(streamed.Containers, c.Containers...)
	})
	if _, err := s.Write([]byte(stream)); err != nil || !slices.Equal(streamed.Containers, []string{"cntr_1"}) || !slices.Equal(streamed.Items, want.Items) {
		t.Errorf("CreatedStream handed on %+v, %v; want items %v and container cntr_1 once", streamed, err, want.Items)
	}
}
