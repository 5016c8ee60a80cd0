package ui

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/memory"
)

// factsData is the facts page's data.
type factsData struct {
	Enabled bool
	Current []factView
	// Past are facts no longer current that no current fact replaced:
	// expired ones, and the history of keys whose newest value expired.
	Past []memory.Fact
}

// factView is a current fact with the values it replaced, newest first,
// and, for a pin, the message that stated it.
type factView struct {
	memory.Fact
	Replaced []memory.Fact
	// Stated is the message the fact was last stated in (Fact.Source of
	// Fact.Conversation), when it is still stored; SourceGone says the
	// fact names one that is not.
	Stated     *memory.Message
	SourceGone bool
}

// maxSourceConversations bounds the conversations the facts page reads to
// show the messages that stated pins.
const maxSourceConversations = 20

// withSources sets Stated (or SourceGone) on the pinned facts of cur that
// name their source message, reading each conversation once.
func (u *UI) withSources(ctx context.Context, tenant, user string, cur []factView) error {
	convs := map[string]map[string]*memory.Message{}
	for i := range cur {
		f := &cur[i]
		if !f.Pinned || f.Source == "" || f.Conversation == "" {
			continue
		}
		byKey, ok := convs[f.Conversation]
		if !ok {
			if len(convs) == maxSourceConversations {
				continue
			}
			_, msgs, err := u.deps.Store.Conversation(ctx, memory.Identity{Tenant: tenant, User: user, Conversation: f.Conversation})
			if err != nil && !errors.Is(err, memory.ErrNotFound) {
				return err
			}
			byKey = make(map[string]*memory.Message, len(msgs))
			for j := range msgs {
				byKey[msgs[j].Key] = &msgs[j]
			}
			convs[f.Conversation] = byKey
		}
		f.Stated = byKey[f.Source]
		f.SourceGone = f.Stated == nil
	}
	return nil
}

// factSubject identifies what a fact is about: its type and normalised key
// (facts with the same subject supersede one another).
func factSubject(f memory.Fact) string {
	return string(f.Type) + "\x00" + strings.Join(strings.Fields(strings.ToLower(f.Key)), " ")
}

// groupFacts splits a user's facts (current and history, newest first) into
// current facts with what each superseded, and the rest.
func groupFacts(all []memory.Fact, now time.Time) ([]factView, []memory.Fact) {
	var cur []factView
	idx := map[string]int{}
	for _, f := range all {
		if f.Current(now) {
			idx[factSubject(f)] = len(cur)
			cur = append(cur, factView{Fact: f})
		}
	}
	var past []memory.Fact
	for _, f := range all {
		if f.Current(now) {
			continue
		}
		if i, ok := idx[factSubject(f)]; ok && f.SupersededAt != nil {
			cur[i].Replaced = append(cur[i].Replaced, f)
			continue
		}
		past = append(past, f)
	}
	return cur, past
}

// handleFacts serves the user's current facts with their history.
func (u *UI) handleFacts(c echo.Context) error {
	user, ok := u.userParam(c)
	if !ok {
		return u.renderError(c, http.StatusBadRequest, "A user id is "+memory.IDChars+".")
	}
	d := factsData{Enabled: u.deps.Recall != nil}
	if d.Enabled {
		all, err := u.deps.Recall.Facts(c.Request().Context(), tenantOf(c), user, true)
		if err != nil {
			return u.storeFailed(c, err)
		}
		d.Current, d.Past = groupFacts(all, time.Now())
		if err := u.withSources(c.Request().Context(), tenantOf(c), user, d.Current); err != nil {
			return u.storeFailed(c, err)
		}
	}
	return u.render(c, http.StatusOK, "facts", page{Title: "Facts of " + user, User: user, Nav: "facts", Data: d})
}

// factParams reads the :user and :id path parameters.
func (u *UI) factParams(c echo.Context) (string, int64, bool) {
	user, ok := u.userParam(c)
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	return user, id, ok && err == nil && id > 0
}

// backToFacts redirects to the user's facts page.
func backToFacts(c echo.Context, user string) error {
	return c.Redirect(http.StatusSeeOther, "/ui/users/"+url.PathEscape(user)+"/facts?tenant="+url.QueryEscape(tenantOf(c)))
}

// handlePin pins (or unpins) one current fact.
func (u *UI) handlePin(pinned bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		user, id, ok := u.factParams(c)
		if !ok {
			return u.renderError(c, http.StatusBadRequest, "Bad user or fact id.")
		}
		if u.deps.Pinner == nil {
			return u.renderError(c, http.StatusServiceUnavailable, "Pinning is not available on this store.")
		}
		err := u.deps.Pinner.SetFactPinned(c.Request().Context(), tenantOf(c), user, id, pinned)
		if errors.Is(err, memory.ErrNotFound) {
			return u.renderError(c, http.StatusNotFound, "No such current fact for this user.")
		}
		if err != nil {
			return u.storeFailed(c, err)
		}
		return backToFacts(c, user)
	}
}

// handleDeleteFact deletes one fact.
func (u *UI) handleDeleteFact(c echo.Context) error {
	user, id, ok := u.factParams(c)
	if !ok {
		return u.renderError(c, http.StatusBadRequest, "Bad user or fact id.")
	}
	if u.deps.Recall == nil {
		return u.renderError(c, http.StatusServiceUnavailable, "Recall is not configured on this gateway.")
	}
	err := u.deps.Recall.DeleteFact(c.Request().Context(), tenantOf(c), user, id)
	if errors.Is(err, memory.ErrNotFound) {
		return u.renderError(c, http.StatusNotFound, "No such fact for this user.")
	}
	if err != nil {
		return u.storeFailed(c, err)
	}
	return backToFacts(c, user)
}
