package anthropic

import (
	"reflect"
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
