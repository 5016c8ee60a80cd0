package ui

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/memory"
)

// erasedData is the after-erasure page's data: what is still stored about
// the user, read back from the store.
type erasedData struct {
	Footprint     *memory.Footprint
	Conversations int
	Facts         int
	// Empty is true when nothing of the user is left.
	Empty bool
}

// handleErase erases everything about a user once the form's confirm
// field repeats the user id, then shows what is left.
func (u *UI) handleErase(c echo.Context) error {
	user, ok := u.userParam(c)
	if !ok {
		return u.renderError(c, http.StatusBadRequest, "A user id is "+memory.IDChars+".")
	}
	if c.FormValue("confirm") != user {
		return u.renderError(c, http.StatusBadRequest, "To erase a user, type their id in the confirmation field.")
	}
	if err := u.deps.Store.DeleteUser(c.Request().Context(), tenantOf(c), user); err != nil {
		return u.storeFailed(c, err)
	}
	u.log.Info("ui: erased user", "tenant", tenantOf(c))
	return c.Redirect(http.StatusSeeOther, "/ui/users/"+url.PathEscape(user)+"/erased?tenant="+url.QueryEscape(tenantOf(c)))
}

// handleErased shows what the store still holds about a user.
func (u *UI) handleErased(c echo.Context) error {
	user, ok := u.userParam(c)
	if !ok {
		return u.renderError(c, http.StatusBadRequest, "A user id is "+memory.IDChars+".")
	}
	ctx := c.Request().Context()
	tenant := tenantOf(c)
	var d erasedData
	convs, err := u.deps.Store.Conversations(ctx, tenant, user)
	if err != nil {
		return u.storeFailed(c, err)
	}
	d.Conversations = len(convs)
	if u.deps.Recall != nil {
		facts, err := u.deps.Recall.Facts(ctx, tenant, user, true)
		if err != nil {
			return u.storeFailed(c, err)
		}
		d.Facts = len(facts)
	}
	d.Empty = d.Conversations == 0 && d.Facts == 0
	if u.deps.Footprint != nil {
		fp, err := u.deps.Footprint.Footprint(ctx, tenant, user)
		if err != nil {
			return u.storeFailed(c, err)
		}
		d.Footprint = &fp
		d.Empty = d.Empty && fp.Empty()
	}
	return u.render(c, http.StatusOK, "erased", page{Title: "After erasing " + user, User: user, Data: d})
}
