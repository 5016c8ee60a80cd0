package proxy

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/upstreamtest"
)

// providerModels is the model list the provider gives the operator's key:
// base models, and the operator's own (fine-tuned ones, whose ids name
// its organization, and one its organization owns), owned by its
// organization or a user of it.
var providerModels = []map[string]any{
	{"id": "gpt-4o-mini", "object": "model", "created": 1721172741, "owned_by": "system"},
	{"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "openai"},
	{"id": "ft:gpt-4o-mini-2024-07-18:acme-corp::9abcDEF", "object": "model", "created": 1730000000, "owned_by": "user-AbCdEfGhIjKlMnOpQrStUvWx"},
	{"id": "ft:gpt-4o-mini-2024-07-18:org-name:suffix:9xyzXYZ", "object": "model", "created": 1730000001, "owned_by": openaiOrg},
	{"id": "davinci:ft-acme-corp-2023-01-02-03-04-05", "object": "model", "created": 1672628645, "owned_by": "acme-corp"},
	{"id": "in-house-7b", "object": "model", "created": 1730000002, "owned_by": openaiOrg},
	{"id": "acme/llama-3-8b", "object": "model", "created": 1730000003, "owned_by": openaiOrg},
	{"id": "meta-llama/Llama-3.1-8B", "object": "model", "created": 1730000004, "owned_by": "vllm"},
}

// operatorsModels names what of providerModels tells of the operator's
// account.
var operatorsModels = []string{"acme-corp", "org-name", "user-AbCdEfGhIjKlMnOpQrStUvWx", openaiOrg, "in-house-7b", "acme/llama"}

// modelsUpstream answers GET /models and /models/{id} from providerModels,
// its path cleaned.
func modelsUpstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, id, _ := strings.Cut(path.Clean(r.URL.Path), "/models/")
		if id == "" {
			_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": providerModels})
			return
		}
		for _, m := range providerModels {
			if m["id"] == id {
				_ = json.NewEncoder(w).Encode(m)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"message":"The model '` + id + `' does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"}}`))
	})
}

// modelsGateway is a gateway in front of modelsUpstream, with the
// operator's key when shared, listing private (Options.PrivateModels).
func modelsGateway(t *testing.T, shared bool, private []string) (*upstreamtest.Server, *gateway) {
	t.Helper()
	up := upstreamtest.New(t, modelsUpstream())
	return up, mustGateway(t, up, func(c *gatewayConfig) {
		if shared {
			c.Upstream.APIKey = operatorKey
		}
		c.PrivateModels = private
	}, Deps{})
}

// getModels GETs path from g.
func getModels(t *testing.T, g *gateway, path string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, g.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

// TestSharedKeyModelList: with the operator's key, GET /v1/models lists
// the provider's base models and leaves out the operator's own —
// fine-tuned models, whose ids name its organization, and models its
// organization or one of its users owns — unless the operator lists them
// (Options.PrivateModels), and then without the owner's id; with the
// client's own key the list is the provider's.
func TestSharedKeyModelList(t *testing.T) {
	base := []string{"gpt-4o-mini", "gpt-4o", "meta-llama/Llama-3.1-8B"}
	for _, tt := range []struct {
		name    string
		shared  bool
		private []string
		want    []string
	}{
		{"operator's key", true, nil, base},
		{"operator's key, a fine-tune listed", true, []string{"ft:gpt-4o-mini-2024-07-18:acme-corp::9abcDEF"}, append(base[:3:3], "ft:gpt-4o-mini-2024-07-18:acme-corp::9abcDEF")},
		{"operator's key, fine-tunes listed by prefix", true, []string{"ft:gpt-4o-mini-2024-07-18:*"},
			append(base[:3:3], "ft:gpt-4o-mini-2024-07-18:acme-corp::9abcDEF", "ft:gpt-4o-mini-2024-07-18:org-name:suffix:9xyzXYZ")},
		{"client's key", false, nil, []string{"gpt-4o-mini", "gpt-4o", "ft:gpt-4o-mini-2024-07-18:acme-corp::9abcDEF",
			"ft:gpt-4o-mini-2024-07-18:org-name:suffix:9xyzXYZ", "davinci:ft-acme-corp-2023-01-02-03-04-05", "in-house-7b",
			"acme/llama-3-8b", "meta-llama/Llama-3.1-8B"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, g := modelsGateway(t, tt.shared, tt.private)
			resp, b := getModels(t, g, "/v1/models")
			var list struct {
				Object string
				Data   []struct {
					ID      string `json:"id"`
					Object  string `json:"object"`
					OwnedBy string `json:"owned_by"`
					Created int64  `json:"created"`
				}
			}
			if resp.StatusCode != 200 || json.Unmarshal(b, &list) != nil || list.Object != "list" {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			var ids []string
			for _, m := range list.Data {
				ids = append(ids, m.ID)
				if m.Object != "model" || m.Created == 0 || m.OwnedBy == "" {
					t.Errorf("model %s lost its members: %+v", m.ID, m)
				}
			}
			slices.Sort(ids)
			if want := slices.Sorted(slices.Values(tt.want)); !slices.Equal(ids, want) {
				t.Errorf("listed %q, want %q", ids, tt.want)
			}
			if !tt.shared {
				return
			}
			for _, s := range operatorsModels {
				if strings.Contains(string(b), s) && !slices.ContainsFunc(tt.want, func(id string) bool { return strings.Contains(id, s) }) {
					t.Errorf("the list names %q: %s", s, b)
				}
			}
			if strings.Contains(string(b), "user-AbCd") || strings.Contains(string(b), openaiOrg) {
				t.Errorf("a listed model's owner names the account: %s", b)
			}
		})
	}
}

// TestSharedKeyModelLookup: with the operator's key, GET /v1/models/{id}
// of one of the operator's own models the operator did not list is
// answered as the provider answers an unknown model (404
// model_not_found) — a fine-tune's without calling the provider — and a
// listed one's owner is redacted; with the client's own key every lookup
// is the provider's.
func TestSharedKeyModelLookup(t *testing.T) {
	const acme = "ft:gpt-4o-mini-2024-07-18:acme-corp::9abcDEF"
	for _, tt := range []struct {
		name    string
		id      string
		shared  bool
		private []string
		status  int
		calls   int
	}{
		{"base model", "gpt-4o-mini", true, nil, 200, 1},
		{"fine-tune", acme, true, nil, 404, 0},
		{"legacy fine-tune", "davinci:ft-acme-corp-2023-01-02-03-04-05", true, nil, 404, 0},
		{"fine-tune unknown to the provider", "ft:gpt-4o:other::x", true, nil, 404, 0},
		{"the organization's model", "in-house-7b", true, nil, 404, 1},
		{"the organization's model, a slash in its id", "acme/llama-3-8b", true, nil, 404, 1},
		{"a served model, a slash in its id", "meta-llama/Llama-3.1-8B", true, nil, 200, 1},
		{"listed fine-tune", acme, true, []string{acme}, 200, 1},
		{"fine-tune, client's key", acme, false, nil, 200, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up, g := modelsGateway(t, tt.shared, tt.private)
			resp, b := getModels(t, g, "/v1/models/"+strings.ReplaceAll(url.PathEscape(tt.id), "%2F", "/"))
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if n := up.Calls(); n != tt.calls {
				t.Errorf("upstream calls %d, want %d", n, tt.calls)
			}
			if tt.status == 404 {
				if typ, code, param := apiErrorBody(t, b); typ != "invalid_request_error" || code != "model_not_found" || param != "model" {
					t.Errorf("type %q code %q param %q, want the provider's unknown model: %s", typ, code, param, b)
				}
			} else {
				var m struct{ ID, Object string }
				if json.Unmarshal(b, &m) != nil || m.ID != tt.id || m.Object != "model" {
					t.Errorf("not the model %s: %s", tt.id, b)
				}
			}
			if tt.shared && (strings.Contains(string(b), "user-AbCd") || strings.Contains(string(b), openaiOrg)) {
				t.Errorf("the answer names the account: %s", b)
			}
		})
	}
}

// TestSharedKeyModelListSpelledOtherwise: a model list asked for by a
// path that is not in clean form (which only gateway keys refuse) is
// filtered too.
func TestSharedKeyModelListSpelledOtherwise(t *testing.T) {
	for _, pth := range []string{"/v1/models/", "/v1/./models", "/v1/models/x/.."} {
		t.Run(pth, func(t *testing.T) {
			up, g := modelsGateway(t, true, nil)
			resp, b := getModels(t, g, pth)
			if resp.StatusCode != 200 || up.Calls() != 1 {
				t.Fatalf("status %d, %d upstream calls: %s", resp.StatusCode, up.Calls(), b)
			}
			if strings.Contains(string(b), "acme") || strings.Contains(string(b), openaiOrg) {
				t.Errorf("the list names the operator's account: %s", b)
			}
		})
	}
}
