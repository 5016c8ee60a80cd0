package ui

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/memory"
)

// conversationData is the conversation page's data.
type conversationData struct {
	Conversation memory.Conversation
	Messages     []messageView
	Branches     []branchView
	Summaries    []memory.Summary
}

// branchView is a superseded branch as the page shows it.
type branchView struct {
	SupersededAt any
	Messages     []messageView
}

// handleConversation serves one conversation: its live messages in order,
// the superseded branches apart, and every summary version.
func (u *UI) handleConversation(c echo.Context) error {
	user, ok := u.userParam(c)
	conv := c.Param("id")
	if !ok || !memory.ValidID(conv) {
		return u.renderError(c, http.StatusBadRequest, "User and conversation ids are "+memory.IDChars+".")
	}
	id := memory.Identity{Tenant: tenantOf(c), User: user, Conversation: conv}
	ctx := c.Request().Context()
	meta, msgs, err := u.deps.Store.Conversation(ctx, id)
	if errors.Is(err, memory.ErrNotFound) {
		return u.renderError(c, http.StatusNotFound, "No such conversation for this user in this tenant.")
	}
	if err != nil {
		return u.storeFailed(c, err)
	}
	branches, err := u.deps.Inspect.Branches(ctx, id)
	if err != nil {
		return u.storeFailed(c, err)
	}
	sums, err := u.deps.Inspect.Summaries(ctx, id)
	if err != nil {
		return u.storeFailed(c, err)
	}
	d := conversationData{Conversation: meta, Summaries: sums}
	for _, m := range msgs {
		d.Messages = append(d.Messages, viewMessage(m))
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
