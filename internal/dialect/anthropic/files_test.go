package anthropic

import (
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// files returns the file states of ids.
func files(ids ...string) []memory.ProviderState {
	out := make([]memory.ProviderState, len(ids))
	for i, id := range ids {
		out[i] = memory.ProviderState{Kind: memory.StateFile, ID: id}
	}
	return out
}

// bashResult is an assistant's bash code execution result naming the
// file the code wrote.
const bashResult = `{"type":"bash_code_execution_tool_result","tool_use_id":"srvtoolu_1","content":{"type":"bash_code_execution_result",` +
	`"stdout":"","stderr":"","return_code":0,"content":[{"type":"bash_code_execution_output","file_id":"file_out"}]}}`

// TestRequestFiles: the Files API ids a Messages body names wherever the
// provider reads one — a document's or an image's file source (in a
// message, in a tool result), a container_upload, the outputs of a code
// execution result sent back — each value of a member given twice, by
// an escaped name too; not a client tool's input, nor a body naming
// none.
func TestRequestFiles(t *testing.T) {
	user := func(blocks string) string {
		return `{"model":"c","messages":[{"role":"user","content":[` + blocks + `]}]}`
	}
	for _, tt := range []struct {
		name, body string
		want       []memory.ProviderState
	}{
		{"text", user(`{"type":"text","text":"file_id"}`), nil},
		{"json in text", user(`{"type":"text","text":"{\"file_id\": \"file_x\"}"}`), nil},
		{"spaced", user(`{"type":"container_upload","file_id" : "file_sp"}`), files("file_sp")},
		{"document", user(`{"type":"document","source":{"type":"file","file_id":"file_doc"}},{"type":"text","text":"Read it."}`), files("file_doc")},
		{"image", user(`{"type":"image","source":{"type":"file","file_id":"file_img"}}`), files("file_img")},
		{"container upload", user(`{"type":"container_upload","file_id":"file_up"}`), files("file_up")},
		{"tool result", user(`{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"image","source":{"type":"file","file_id":"file_tr"}}]}`), files("file_tr")},
		{"given twice", user(`{"type":"document","source":{"type":"file","file_id":"file_a","file_id":"file_b"}}`), files("file_a", "file_b")},
		{"escaped name", user(`{"type":"document","source":{"type":"file","file\u005fid":"file_esc"}}`), files("file_esc")},
		{"code execution output", `{"model":"c","messages":[{"role":"user","content":"Plot it."},{"role":"assistant","content":[` + bashResult + `]},{"role":"user","content":"Thanks."}]}`, files("file_out")},
		{"messages twice", `{"model":"c","messages":[{"role":"user","content":[{"type":"container_upload","file_id":"file_first"}]}],"messages":[{"role":"user","content":"hi"}]}`, files("file_first")},
		{"client tool input", `{"model":"c","messages":[{"role":"user","content":"Open it."},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"open","input":{"file_id":"file_mine"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"opened"}]}]}`, nil},
		{"not a string", user(`{"type":"container_upload","file_id":7}`), nil},
	} {
		r, err := ParseRequest([]byte(tt.body))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := r.States(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: states %v, want %v", tt.name, got, tt.want)
		}
	}
	r, err := ParseRequest([]byte(`{"model":"c","container":"container_1","messages":[{"role":"user","content":[{"type":"container_upload","file_id":"file_up"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := append([]memory.ProviderState{{Kind: memory.StateContainer, ID: "container_1"}}, files("file_up")...); !reflect.DeepEqual(r.States(), want) {
		t.Errorf("container and file: %v, want %v", r.States(), want)
	}
}

// TestMayNameFile: the byte scan that spares reading a body token by
// token finds every member named file_id, and passes over the name in a
// message's text.
func TestMayNameFile(t *testing.T) {
	for _, tt := range []struct {
		b    string
		want bool
	}{
		{`{"file_id":"f"}`, true},
		{`{"file_id"` + "\n\t :" + `"f"}`, true},
		{`{"file\u005Fid":"f"}`, true},
		{`{"\u0066ile_id":"f"}`, true},
		{`{"text":"file_id"}`, false},
		{`{"text":"{\"file_id\":1}"}`, false},
		{`{"text":"caf\u00e9"}`, false},
		{`{"text":"\\"file_id":1}`, true}, // an escaped backslash: the quote is not
		{`{"text":"x\u00`, false},
	} {
		if got := mayNameFile([]byte(tt.b)); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.b, got, tt.want)
		}
	}
}

// replyWithFiles is a whole Messages reply whose code execution ran in
// container_1 and wrote two files, one by each tool version.
const replyWithFiles = `{"id":"msg_1","type":"message","role":"assistant","content":[` +
	`{"type":"server_tool_use","id":"srvtoolu_1","name":"bash_code_execution","input":{"command":"python plot.py","file_id":"file_input"}},` + bashResult + `,` +
	`{"type":"code_execution_tool_result","tool_use_id":"srvtoolu_2","content":{"type":"code_execution_result","stdout":"","stderr":"","return_code":0,"content":[{"type":"code_execution_output","file_id":"file_old"}]}},` +
	`{"type":"text","text":"Done.","citations":null}],"container":{"id":"container_1","expires_at":"2026-12-02T15:00:00Z"},"stop_reason":"end_turn"}`

// TestReplyStates: what a whole reply names — the container it ran in
// and the files its code execution wrote; not a tool's input.
func TestReplyStates(t *testing.T) {
	got, err := ReplyStates([]byte(replyWithFiles))
	if err != nil {
		t.Fatal(err)
	}
	want := append([]memory.ProviderState{{Kind: memory.StateContainer, ID: "container_1"}}, files("file_out", "file_old")...)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
	for _, b := range []string{`{"content":[]}`, `{"content":[{"type":"bash_code_execution_tool_result","content":{"type":"bash_code_execution_tool_result_error","error_code":"unavailable"}}]}`} {
		if got, err := ReplyStates([]byte(b)); err != nil || len(got) != 0 {
			t.Errorf("%s: %v %v, want none", b, got, err)
		}
	}
}

// TestStateStream: the container a stream names, in its message_start
// message or its message_delta delta, and the files a code execution
// result's content_block_start names, handed on as its event completes
// whatever the pieces; final once message_stop was read. An event past
// the limit that may name the container stops it; a content block past
// it is skipped (its files stay unbound).
func TestStateStream(t *testing.T) {
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"container\":null}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"container\":{\"id\":\"no\"}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":" + bashResult + "}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"bash_code_execution_tool_result\",\"content\":{\"type\":\"bash_code_execution_result\",\"stdout\":\"" + strings.Repeat("a", 2<<10) + "\",\"content\":[{\"file_id\":\"file_big\"}]}}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"container\":{\"id\":\"container_1\"}}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, size := range []int{1, 7, len(stream)} {
		var got []memory.ProviderState
		finals := 0
		s := NewStateStream(1<<10, func(sts []memory.ProviderState, final bool) {
			got = append(got, sts...)
			if final {
				finals++
			}
		})
		for i := 0; i < len(stream); i += size {
			if _, err := s.Write([]byte(stream[i:min(i+size, len(stream))])); err != nil {
				t.Fatal(err)
			}
		}
		want := append(files("file_out"), memory.ProviderState{Kind: memory.StateContainer, ID: "container_1"})
		if !reflect.DeepEqual(got, want) || finals != 1 {
			t.Errorf("pieces of %d: %v, %d finals; want %v", size, got, finals, want)
		}
	}
	big := "event: message_delta\ndata: {\"type\":\"message_delta\",\"pad\":\"" + strings.Repeat("a", 2<<10) + "\"}\n\n"
	if _, err := NewStateStream(1<<10, func([]memory.ProviderState, bool) {}).Write([]byte(big)); err == nil {
		t.Error("a message_delta past the limit: no error")
	}
}

// TestReplyReader: a whole reply read as it is relayed, in reads of any
// size, is given byte for byte, and its container and files are handed
// on before the bytes naming them are read; a content block larger than
// the limit stops the reading, what came before it handed on.
func TestReplyReader(t *testing.T) {
	byID := func(a, b memory.ProviderState) int { return strings.Compare(string(a.Kind)+a.ID, string(b.Kind)+b.ID) }
	want := append([]memory.ProviderState{{Kind: memory.StateContainer, ID: "container_1"}}, files("file_old", "file_out")...)
	for _, size := range []int{1, 7, 4096} {
		var got []memory.ProviderState
		r := NewReplyReader(strings.NewReader(replyWithFiles), 1<<10, 1<<20, func(sts []memory.ProviderState, final bool) { got = append(got, sts...) },
			func(err error) { t.Errorf("stopped: %v", err) })
		var out []byte
		for {
			p := make([]byte, size)
			n, err := r.Read(p)
			out = append(out, p[:n]...)
			// The bytes naming a file are out only once it was handed on.
			if strings.Contains(string(out), `"file_id":"file_out"`) && len(got) == 0 {
				t.Fatalf("reads of %d: file_out relayed before it was handed on", size)
			}
			if err != nil {
				break
			}
		}
		slices.SortFunc(got, byID) // the container comes last in this reply
		if string(out) != replyWithFiles || !reflect.DeepEqual(got, want) {
			t.Errorf("reads of %d: %d bytes, %v; want the reply whole and %v", size, len(out), got, want)
		}
	}
	big := `{"content":[` + bashResult + `,{"type":"text","text":"` + strings.Repeat("a", 2<<10) + `"},` +
		`{"type":"code_execution_tool_result","content":{"content":[{"file_id":"file_late"}]}}],"container":{"id":"container_1"}}`
	var got []memory.ProviderState
	var stopped error
	out, err := io.ReadAll(NewReplyReader(strings.NewReader(big), 1<<10, 1<<20, func(sts []memory.ProviderState, final bool) { got = append(got, sts...) },
		func(err error) { stopped = err }))
	if err != nil || string(out) != big || stopped == nil || !reflect.DeepEqual(got, files("file_out")) {
		t.Errorf("a block past the limit: %v, %d bytes, stopped %v, %v; want the reply whole, stopped, and file_out alone", err, len(out), stopped, got)
	}
}
