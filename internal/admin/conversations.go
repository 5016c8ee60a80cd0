package admin

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// Store is what the conversation routes need of the memory store. Every
// call is scoped to the caller's tenant.
type Store interface {
	Conversations(ctx context.Context, tenant, user string) ([]memory.Conversation, error)
	Conversation(ctx context.Context, id memory.Identity) (memory.Conversation, []memory.Message, error)
	// ConversationPage reads one conversation and a page of its live
	// messages (memory.Page; see ReadPage).
	ConversationPage(ctx context.Context, id memory.Identity, p memory.Page) (memory.Conversation, []memory.Message, error)
	DeleteConversation(ctx context.Context, id memory.Identity) error
	DeleteUser(ctx context.Context, tenant, user string) error
	// Footprint counts what is stored about a user, table by table.
	Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error)
}

// QueueEraser is a Store whose erasure of a user, or deletion of a
// conversation, also purges what it voids from the capture and
// enrichment queues and says what became of it (engine.Engine's
// EraseUser and EraseConversation): how many turns still queued for
// capture (answered, not yet stored) it purged, or that the purge is
// pending (the queues did not answer: it is retried in the background).
type QueueEraser interface {
	EraseUser(ctx context.Context, tenant, user string) (memory.QueuePurge, error)
	EraseConversation(ctx context.Context, id memory.Identity) (memory.QueuePurge, error)
}

// Values of the answers' "queue_purge": whether what the erasure or
// deletion voids in the capture and enrichment queues is purged.
const (
	queuePurgeDone    = "done"
	queuePurgePending = "pending"
)

// queuePurgeState is the answers' "queue_purge" of p.
func queuePurgeState(p memory.QueuePurge) string {
	if p.Pending {
		return queuePurgePending
	}
	return queuePurgeDone
}

// storeScope is scope for the conversation routes, answering 503 when no
// store is configured.
func (a *Admin) storeScope(c echo.Context, user, where string) (memory.Identity, *apierr.Error) {
	if a.store == nil {
		return memory.Identity{}, apierr.Unavailable("Memory is not configured on this gateway.")
	}
	return a.scope(c.Request(), user, where)
}

// conversationID reads and checks the :id path parameter.
func conversationID(c echo.Context) (string, *apierr.Error) {
	id := c.Param("id")
	if !memory.ValidID(id) {
		return "", apierr.Invalid("id", "A conversation id must be "+memory.IDChars+".")
	}
	return id, nil
}

// storeError translates a store error.
func (a *Admin) storeError(c echo.Context, err error) *apierr.Error {
	if errors.Is(err, memory.ErrNotFound) {
		return &apierr.Error{Status: http.StatusNotFound, Type: apierr.TypeInvalidRequest, Code: "not_found", Message: "No such conversation or user in this tenant."}
	}
	a.log.Error("memory store error", "request_id", server.RequestID(c), "error", err)
	return apierr.Unavailable("The memory store could not be reached.")
}

// handleListConversations serves GET /v1/memory/conversations?user=U.
func (a *Admin) handleListConversations(c echo.Context) error {
	id, aerr := a.storeScope(c, c.QueryParam("user"), userInQuery)
	if aerr != nil {
		return aerr
	}
	convs, err := a.store.Conversations(c.Request().Context(), id.Tenant, id.User)
	if err != nil {
		return a.storeError(c, err)
	}
	if convs == nil {
		convs = []memory.Conversation{}
	}
	apierr.WriteJSON(c.Response(), http.StatusOK, map[string]any{"object": "list", "data": convs})
	return nil
}

// handleGetConversation serves GET /v1/memory/conversations/{id}?user=U:
// the conversation and one page of its live messages (ParsePage, ReadPage),
// with the cursors of an OpenAI list (first_id and last_id, the seqs of
// the page's first and last messages; has_more).
func (a *Admin) handleGetConversation(c echo.Context) error {
	id, aerr := a.storeScope(c, c.QueryParam("user"), userInQuery)
	if aerr == nil {
		id.Conversation, aerr = conversationID(c)
	}
	var p memory.Page
	if aerr == nil {
		p, aerr = ParsePage(c.QueryParams())
	}
	if aerr != nil {
		return aerr
	}
	page, err := ReadPage(c.Request().Context(), a.store, id, p)
	if err != nil {
		return a.storeError(c, err)
	}
	answer := map[string]any{"conversation": page.Conversation, "messages": page.Messages,
		"first_id": nil, "last_id": nil, "has_more": page.HasMore}
	if n := len(page.Messages); n > 0 {
		answer["first_id"], answer["last_id"] = page.Messages[0].Seq, page.Messages[n-1].Seq
	}
	apierr.WriteJSON(c.Response(), http.StatusOK, answer)
	return nil
}

// handleDeleteConversation serves DELETE /v1/memory/conversations/{id}?user=U.
// When the store says (QueueEraser), the answer says whether the
// conversation's entries in the queues are purged ("queue_purge": "done")
// or the purge is still pending. A conversation nothing is stored of
// answers 404 not_found when the queues hold none of it, and also when
// they could not be asked (the purge pending; its message says so): the
// deletion stands all the same, but nothing says there was one.
func (a *Admin) handleDeleteConversation(c echo.Context) error {
	id, aerr := a.storeScope(c, c.QueryParam("user"), userInQuery)
	if aerr == nil {
		id.Conversation, aerr = conversationID(c)
	}
	if aerr != nil {
		return aerr
	}
	answer := map[string]any{"id": id.Conversation, "object": "conversation", "deleted": true}
	if qe, ok := a.store.(QueueEraser); ok {
		p, err := qe.EraseConversation(c.Request().Context(), id)
		if p.Pending && errors.Is(err, memory.ErrNotFound) {
			return &apierr.Error{Status: http.StatusNotFound, Type: apierr.TypeInvalidRequest, Code: "not_found",
				Message: "No such conversation is stored in this tenant. The queues could not be asked whether turns of it wait there; " +
					"any that do are refused, and purged once the queues answer."}
		}
		if err != nil {
			return a.storeError(c, err)
		}
		answer["queue_purge"] = queuePurgeState(p)
	} else if err := a.store.DeleteConversation(c.Request().Context(), id); err != nil {
		return a.storeError(c, err)
	}
	apierr.WriteJSON(c.Response(), http.StatusOK, answer)
	return nil
}

// handleDeleteUser serves DELETE /v1/memory/users/{user}: everything stored
// about the user in the caller's tenant is erased, and the user's
// exchanges still queued are purged from the queues (engine.DeleteUser).
// A user nothing is stored about is erased all the same (its tombstone
// refuses its late turns). The answer names the id erased, whether the
// value was that id or a body value's digest ("named_by": "id" or
// "digest", memory.NamedUserID), what was stored about the user just
// before the erasure ("stored": memory.Footprint, counted before it; left
// out when the count failed) and, when the store says (QueueEraser), how
// many of the user's turns were queued and not yet stored ("queued", the
// capture queue's entries the erasure purged) and whether that purge is
// done ("queue_purge": "done") or pending ("pending", retried in the
// background while the queues do not answer; "queued" is then left out);
// "found" is whether either held anything (left out when neither could
// say), so an operator who mistyped a user sees that nothing was stored
// or queued under it.
func (a *Admin) handleDeleteUser(c echo.Context) error {
	value := c.Param("user")
	id, aerr := a.storeScope(c, value, userInPath)
	if aerr != nil {
		return aerr
	}
	ctx := c.Request().Context()
	answer := map[string]any{"user": id.User, "object": "user", "deleted": true, "named_by": "digest"}
	if memory.ValidID(value) {
		answer["named_by"] = "id"
	}
	f, ferr := a.store.Footprint(ctx, id.Tenant, id.User)
	if ferr != nil {
		a.log.Warn("erasing a user without counting what was stored", "request_id", server.RequestID(c), "error", ferr)
	} else {
		answer["found"], answer["stored"] = !f.Empty(), f
	}
	if qe, ok := a.store.(QueueEraser); ok {
		p, err := qe.EraseUser(ctx, id.Tenant, id.User)
		if err != nil {
			return a.storeError(c, err)
		}
		answer["queue_purge"] = queuePurgeState(p)
		switch {
		case p.Pending:
			if answer["found"] != true {
				delete(answer, "found") // the queues could not say
			}
		case p.Queued > 0:
			answer["queued"], answer["found"] = p.Queued, true
		default:
			answer["queued"] = 0
		}
	} else if err := a.store.DeleteUser(ctx, id.Tenant, id.User); err != nil {
		return a.storeError(c, err)
	}
	apierr.WriteJSON(c.Response(), http.StatusOK, answer)
	return nil
}
