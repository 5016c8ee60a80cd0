package ui

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/admin"
	"github.com/memgate/memgate/internal/memory"
)

// conversationData is the conversation page's data: a page of the live
// messages (admin.ReadPage), with the queries of the pages before and
// after it ("" when there is none) and the seqs of its ends.
type conversationData struct {
	Conversation      memory.Conversation
	Messages          []messageView
	FirstSeq, LastSeq int64
	Earlier, Later    template.URL
	Branches          []branchView
	// BranchMessages counts the superseded messages shown; BranchesCut
	// says older ones are not (MaxBranchMessages).
	BranchMessages int
	BranchesCut    bool
	Summaries      []memory.Summary
}

// MaxBranchMessages bounds the superseded messages the conversation page
// shows, the newest: a conversation regenerated thousands of times shows
// its latest branches, not every one.
const MaxBranchMessages = 500

// branchView is a superseded branch as the page shows it.
type branchView struct {
	SupersededAt any
	Messages     []messageView
}

// dropOldest keeps the newest keep messages of branches (oldest first,
// each in Seq order, as Inspector.Branches returns them) and says whether
// it dropped any.
func dropOldest(branches []memory.Branch, keep int) ([]memory.Branch, bool) {
	n := 0
	for _, b := range branches {
		n += len(b.Messages)
	}
	cut := n > keep
	for ; n > keep && len(branches) > 0; n-- {
		branches[0].Messages = branches[0].Messages[1:]
		if len(branches[0].Messages) == 0 {
			branches = branches[1:]
		}
	}
	return branches, cut
}

// handleConversation serves one conversation: a page of its live
// messages in order (the query's limit, after and before, as on the
// management API: admin.ParsePage), with links to the pages before and
// after it, the superseded branches apart, and every summary version.
func (u *UI) handleConversation(c echo.Context) error {
	user, ok := u.userParam(c)
	conv := c.Param("id")
	if !ok || !memory.ValidID(conv) {
		return u.renderError(c, http.StatusBadRequest, "User and conversation ids are "+memory.IDChars+".")
	}
	q := c.QueryParams()
	p, aerr := admin.ParsePage(q)
	if aerr != nil {
		return u.renderError(c, http.StatusBadRequest, aerr.Message)
	}
	id := memory.Identity{Tenant: tenantOf(c), User: user, Conversation: conv}
	ctx := c.Request().Context()
	pg, err := admin.ReadPage(ctx, u.deps.Store, id, p)
	if errors.Is(err, memory.ErrNotFound) {
		return u.renderError(c, http.StatusNotFound, "No such conversation for this user in this tenant.")
	}
	if err != nil {
		return u.storeFailed(c, err)
	}
	// One more than shown tells whether older ones exist.
	branches, err := u.deps.Inspect.Branches(ctx, id, MaxBranchMessages+1)
	if err != nil {
		return u.storeFailed(c, err)
	}
	branches, cut := dropOldest(branches, MaxBranchMessages)
	sums, err := u.deps.Inspect.Summaries(ctx, id)
	if err != nil {
		return u.storeFailed(c, err)
	}
	d := conversationData{Conversation: pg.Conversation, Summaries: sums}
	for _, b := range branches {
		d.BranchMessages += len(b.Messages)
	}
	d.BranchesCut = cut
	for _, m := range pg.Messages {
		d.Messages = append(d.Messages, viewMessage(m))
	}
	if n := len(pg.Messages); n > 0 {
		d.FirstSeq, d.LastSeq = pg.Messages[0].Seq, pg.Messages[n-1].Seq
		backward := p.Backward
		if (backward && pg.HasMore) || (!backward && p.After > 0) {
			d.Earlier = pageQuery(q, "before", pg.Messages[0].Seq)
		}
		if (!backward && pg.HasMore) || backward {
			d.Later = pageQuery(q, "after", pg.Messages[n-1].Seq)
		}
	}
	for _, b := range branches {
		bv := branchView{SupersededAt: b.SupersededAt}
		for _, m := range b.Messages {
			bv.Messages = append(bv.Messages, viewMessage(m))
		}
		d.Branches = append(d.Branches, bv)
	}
	return u.render(c, http.StatusOK, "conversation", page{Title: "Conversation " + conv, User: user, Nav: "conversations", Data: d})
}

// pageQuery is the link to q (the tenant, the page's limit) with the
// cursor key set to seq, and the other cursor dropped.
func pageQuery(q url.Values, key string, seq int64) template.URL {
	next := url.Values{}
	for k, v := range q {
		if k != "after" && k != "before" {
			next[k] = v
		}
	}
	next.Set(key, strconv.FormatInt(seq, 10))
	return template.URL("?" + next.Encode()) // encoded: safe in an href
}
