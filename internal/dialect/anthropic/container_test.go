package anthropic

import (
	"reflect"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestRequestContainer: the container a Messages body names (an id, or
// an object's id), none for a new one (skills alone, null, absent), and
// the member given twice that makes it ambiguous.
func TestRequestContainer(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tt := range []struct {
		body       string
		want       []memory.ProviderState
		param, key string
	}{
		{`{"model":"c",` + msgs + `}`, nil, "", ""},
		{`{"model":"c","container":null,` + msgs + `}`, nil, "", ""},
		{`{"model":"c","container":{"skills":[{"type":"anthropic","skill_id":"pptx"}]},` + msgs + `}`, nil, "", ""},
		{`{"model":"c","container":"container_1",` + msgs + `}`, []memory.ProviderState{{Kind: memory.StateContainer, ID: "container_1"}}, "", ""},
		{`{"model":"c","container":{"id":"container_1","skills":[]},` + msgs + `}`, []memory.ProviderState{{Kind: memory.StateContainer, ID: "container_1"}}, "", ""},
		{`{"model":"c","container":{"id":7},` + msgs + `}`, []memory.ProviderState{{Kind: memory.StateContainer, ID: ""}}, "", ""},
		{`{"model":"c","container":{"id":"container_1","id":"container_2"},` + msgs + `}`, []memory.ProviderState{{Kind: memory.StateContainer, ID: "container_2"}}, "container", "id"},
		{`{"model":"c","container":"container_1","container":"container_2",` + msgs + `}`, []memory.ProviderState{{Kind: memory.StateContainer, ID: "container_2"}}, "", "container"},
	} {
		r, err := ParseRequest([]byte(tt.body))
		if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		param, key := r.Repeated()
		if !reflect.DeepEqual(r.States(), tt.want) || param != tt.param || key != tt.key {
			t.Errorf("%s: states %v, repeated %q %q; want %v, %q %q", tt.body, r.States(), param, key, tt.want, tt.param, tt.key)
		}
	}
}

// TestContainerStream: the container a stream names, in its message_start
// message or its message_delta delta, handed on as its event completes
// whatever the pieces; final once message_stop was read.
func TestContainerStream(t *testing.T) {
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"container\":null}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"container\":{\"id\":\"no\"}}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"container\":{\"id\":\"container_1\"}}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, size := range []int{1, 7, len(stream)} {
		var ids []string
		finals := 0
		s := NewContainerStream(1<<10, func(id string, final bool) {
			if id != "" {
				ids = append(ids, id)
			}
			if final {
				finals++
			}
		})
		for i := 0; i < len(stream); i += size {
			if _, err := s.Write([]byte(stream[i:min(i+size, len(stream))])); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(ids, []string{"container_1"}) || finals != 1 {
			t.Errorf("pieces of %d: %v, %d finals", size, ids, finals)
		}
	}
	big := "event: message_delta\ndata: {\"type\":\"message_delta\",\"pad\":\"" + strings.Repeat("a", 2<<10) + "\"}\n\n"
	if _, err := NewContainerStream(1<<10, func(string, bool) {}).Write([]byte(big)); err == nil {
		t.Error("a message_delta past the limit: no error")
	}
}
