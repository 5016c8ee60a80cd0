package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/memgate/memgate/internal/apierr"
)

// What a tenant sees of the provider's models when memgate calls the
// provider with the operator's own key: the provider lists, beside its
// base models, the operator's own — fine-tuned models, whose ids name the
// operator's organization ("ft:gpt-4o-mini-2024-07-18:acme-corp::9abcDEF"),
// and models its organization or one of its users owns (owned_by
// "org-…", "user-…") — which every tenant would read. Those are left out
// of GET /v1/models, and GET /v1/models/{id} of one is answered as the
// provider answers an unknown model, unless the operator lists it
// (Options.PrivateModels); a listed one keeps its id (a model id must stay
// usable as it is) and loses its owner's id. Rewriting ids instead would
// make every request naming one need mapping back.

// modelsPath is the provider's model list; modelsPath/{id} one model (an
// id may hold slashes: "meta-llama/Llama-3.1-8B" on vLLM, OpenRouter).
const modelsPath = "/v1/models"

// maxModelsBody bounds a model list read to be filtered; a larger one is
// replaced by a gateway error.
const maxModelsBody = 8 << 20

// modelsRequest reports whether r reads the provider's models (GET
// /v1/models, /v1/models/{id}, its path cleaned), with the model's id of
// a lookup.
func modelsRequest(r *http.Request) (bool, string) {
	if r.Method != http.MethodGet {
		return false, ""
	}
	pth := path.Clean(r.URL.Path)
	if pth == modelsPath {
		return true, ""
	}
	id, ok := strings.CutPrefix(pth, modelsPath+"/")
	return ok, id
}

// fineTuned reports whether id names a fine-tuned model ("ft:…", or a
// legacy one, "davinci:ft-acme-2023-…"): its id names the organization
// that made it.
func fineTuned(id string) bool {
	return strings.HasPrefix(id, "ft:") || strings.Contains(id, ":ft-")
}

// operatorsModel reports whether the model id owned by ownedBy is the
// operator's own: fine-tuned, or owned by an account id (accountIDs: its
// organization, a user of it).
func operatorsModel(id, ownedBy string) bool {
	return fineTuned(id) || accountIDs.MatchString(ownedBy)
}

// listsModel reports whether the operator listed id (Options.PrivateModels).
func (p *Proxy) listsModel(id string) bool {
	for _, m := range p.opts.PrivateModels {
		if prefix, ok := strings.CutSuffix(m, "*"); ok && strings.HasPrefix(id, prefix) || m == id {
			return true
		}
	}
	return false
}

// unknownModel is the provider's answer to a lookup of a model it does
// not hold.
func unknownModel(id string) *apierr.Error {
	return &apierr.Error{Status: http.StatusNotFound, Type: apierr.TypeInvalidRequest, Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("The model '%s' does not exist", id)}
}

// sharedModel returns the model object m of the provider's answer as a
// tenant may see it, or false when it is the operator's own and not
// listed: a listed one's owned_by is replaced by redacted.
func (p *Proxy) sharedModel(m map[string]json.RawMessage) (map[string]json.RawMessage, bool) {
	var id, owner string
	_ = json.Unmarshal(m["id"], &id)
	_ = json.Unmarshal(m["owned_by"], &owner)
	if !operatorsModel(id, owner) {
		return m, true
	}
	if !p.listsModel(id) {
		return nil, false
	}
	if _, ok := m["owned_by"]; ok {
		m["owned_by"] = json.RawMessage(`"` + redacted + `"`)
	}
	return m, true
}

// scrubModels edits a 2xx answer to a request for the provider's models
// (forward.models) made with the operator's key: the operator's own models
// it did not list are left out of a list (an object with data), and a
// lookup of one becomes the provider's 404 for an unknown model. An
// answer that cannot be read (too large, left encoded: see decode, not a
// JSON object) is replaced by a gateway 502.
func (p *Proxy) scrubModels(resp *http.Response, a *api) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxModelsBody+1))
	if err != nil {
		return fmt.Errorf("read upstream models: %w", err)
	}
	var obj map[string]json.RawMessage
	if enc := resp.Header.Get("Content-Encoding"); len(body) > maxModelsBody || enc != "" && enc != "identity" || json.Unmarshal(body, &obj) != nil {
		replace(resp, a, &apierr.Error{Status: http.StatusBadGateway, Type: apierr.TypeUpstream, Code: "upstream_error",
			Message: "The upstream API's answer about its models could not be read; it was withheld."})
		return nil
	}
	if raw, ok := obj["data"]; ok {
		var data []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &data); err != nil {
			data = nil // not a list of models: none listed
		}
		kept := []map[string]json.RawMessage{}
		for _, m := range data {
			if m, ok := p.sharedModel(m); ok {
				kept = append(kept, m)
			}
		}
		if obj["data"], err = json.Marshal(kept); err != nil {
			return fmt.Errorf("encode models: %w", err)
		}
	} else if _, ok := p.sharedModel(obj); !ok {
		var id string
		_ = json.Unmarshal(obj["id"], &id)
		replace(resp, a, unknownModel(id))
		return nil
	}
	if body, err = json.Marshal(obj); err != nil {
		return fmt.Errorf("encode models: %w", err)
	}
	setBody(resp, body)
	return nil
}
