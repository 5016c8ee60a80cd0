package ui

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/admin"
	dialectbody "github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/dialect/chat"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// maxQuestion bounds a previewed question.
const maxQuestion = 4000

// previewData is the preview page's data.
type previewData struct {
	Question      string
	Conversation  string
	Model         string
	Conversations []memory.Conversation
	// Error is why no preview is shown ("" when one is, or none was asked).
	Error  string
	Result *previewResult
}

// previewResult is one assembled prompt, part by part.
type previewResult struct {
	Budget         int
	TokensOriginal int
	TokensSent     int
	OverBudget     bool
	Parts          []partView
	Messages       []messageView
	// Scale is the token count the bars are drawn against.
	Scale int
}

// partView is one part of the prompt: its tokens and, for the memory
// sections, the most it may take of the budget.
type partView struct {
	Name, Label string
	Tokens      int
	// Share and Cap are the part's budget share and its token cap (0: the
	// part has none).
	Share float64
	Cap   int
	// X and W place the part on the stacked bar, UseW and CapW on its own
	// row, all in 0..1000.
	X, W, UseW, CapW float64
}

// partLabels names the parts in prompt order.
var partLabels = []struct{ name, label string }{
	{"system", "App system prompt"},
	{"pinned", "Pinned facts"},
	{"summary", "Summary"},
	{"facts", "Facts"},
	{"recall", "Recalled passages"},
	{"block", "Memory block framing"},
	{"recent", "Recent turns"},
	{"current", "Current turn"},
	{"other", "Reply priming"},
}

// handlePreview serves what the model would see for a typed question: the
// preview route's assembly for the user (in one of their conversations, or
// a new one), with each part's tokens against the budget and its share.
func (u *UI) handlePreview(c echo.Context) error {
	user, ok := u.userParam(c)
	if !ok {
		return u.renderError(c, http.StatusBadRequest, "A user id is "+memory.IDChars+".")
	}
	ctx := c.Request().Context()
	d := previewData{
		Question:     strings.TrimSpace(c.QueryParam("q")),
		Conversation: c.QueryParam("conversation"),
		Model:        strings.TrimSpace(c.QueryParam("model")),
	}
	if d.Model == "" {
		d.Model = u.opts.PreviewModel
	}
	convs, err := u.deps.Store.Conversations(ctx, tenantOf(c), user)
	if err != nil {
		return u.storeFailed(c, err)
	}
	d.Conversations = convs
	p := page{Title: "What the model sees", User: user, Nav: "preview", Data: &d}
	switch {
	case d.Question == "":
		return u.render(c, http.StatusOK, "preview", p)
	case len(d.Question) > maxQuestion:
		d.Error = "The question is too long."
		return u.render(c, http.StatusBadRequest, "preview", p)
	case d.Conversation != "" && !memory.ValidID(d.Conversation):
		d.Error = "A conversation id is " + memory.IDChars + "."
		return u.render(c, http.StatusBadRequest, "preview", p)
	case u.deps.Preparer == nil:
		d.Error = "Memory is not configured on this gateway."
		return u.render(c, http.StatusServiceUnavailable, "preview", p)
	}
	body, err := json.Marshal(map[string]any{
		"model":    d.Model,
		"messages": []map[string]string{{"role": "user", "content": d.Question}},
	})
	if err != nil {
		return err
	}
	req, perr := chat.ParseRequest(body)
	if perr != nil {
		var fe *dialectbody.FieldError
		if errors.As(perr, &fe) {
			d.Error = fe.Msg
		} else {
			d.Error = perr.Error()
		}
		return u.render(c, http.StatusBadRequest, "preview", p)
	}
	id := memory.Identity{Tenant: tenantOf(c), User: user, Conversation: d.Conversation}
	if id.Conversation == "" {
		id.Conversation = admin.ImpliedConversation(ctx, u.deps.Preparer, id, req.Messages, u.opts.MaxHistory)
	}
	mreq := req.Memory(id, memory.ModeRead)
	// The page sets no X-Memory-Cross: cross-conversation recall is on.
	mreq.CrossConversation = true
	prep, err := u.deps.Preparer.Prepare(ctx, mreq)
	if err != nil {
		u.log.Warn("ui: memory preview failed", "request_id", server.RequestID(c), "error", err)
		d.Error = "Memory could not be loaded."
		return u.render(c, http.StatusServiceUnavailable, "preview", p)
	}
	d.Result = u.previewOf(prep)
	return u.render(c, http.StatusOK, "preview", p)
}

// previewOf lays out an assembled prompt for the page.
func (u *UI) previewOf(p memory.Prepared) *previewResult {
	r := &previewResult{Budget: p.Budget, TokensOriginal: p.TokensOriginal, TokensSent: p.TokensSent, OverBudget: p.OverBudget}
	parts := map[string]int{}
	for k, v := range p.Parts {
		parts[k] = v
	}
	sections := parts["pinned"] + parts["summary"] + parts["facts"] + parts["recall"]
	parts["block"] = max(0, parts["memory"]-sections)
	parts["other"] = max(0, p.TokensSent-parts["system"]-parts["memory"]-parts["recent"]-parts["current"])
	r.Scale = max(p.Budget, p.TokensSent, 1)
	sh := u.opts.Shares
	shares := map[string]float64{"summary": sh.Summary, "facts": sh.Facts, "pinned": sh.Pinned, "recall": sh.Recall}
	x := 0.0
	for _, pl := range partLabels {
		pv := partView{Name: pl.name, Label: pl.label, Tokens: parts[pl.name], Share: shares[pl.name]}
		if pv.Share > 0 && p.Budget > 0 {
			pv.Cap = int(pv.Share * float64(p.Budget))
		}
		pv.X = x
		pv.W = 1000 * float64(pv.Tokens) / float64(r.Scale)
		x += pv.W
		row := max(pv.Cap, pv.Tokens, 1)
		pv.UseW = 1000 * float64(pv.Tokens) / float64(row)
		if pv.Cap > 0 {
			pv.CapW = 1000 * float64(pv.Cap) / float64(row)
		}
		r.Parts = append(r.Parts, pv)
	}
	blocks := make(map[int]bool, len(p.Blocks))
	for _, b := range p.Blocks {
		blocks[b.At] = true
	}
	for i, raw := range p.Messages {
		m, err := memory.ParseMessage(raw)
		if err != nil {
			continue
		}
		m.Raw = raw
		v := viewMessage(m)
		switch {
		case i == len(p.Messages)-1:
			v.Part = "current"
		case blocks[i] || (len(p.Blocks) == 0 && memory.IsSystem(m.Role) && strings.Contains(m.Content, "<memory>")):
			v.Part = "memory"
		case memory.IsSystem(m.Role):
			v.Part = "system"
		default:
			v.Part = "recent"
		}
		r.Messages = append(r.Messages, v)
	}
	return r
}
