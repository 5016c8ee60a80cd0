package ui

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/memory"
)

// maxUsersListed bounds the users one page lists.
const maxUsersListed = 200

// usersData is the users page's data.
type usersData struct {
	Query string
	Users []memory.UserActivity
}

// searchQuery reads ?q=, trimmed: part of a user id, or the whole value
// an app sent in a body's user field, which names the user it is stored
// as (memory.BodyUserID: "John Smith" finds its digest's user).
func searchQuery(c echo.Context) string {
	return memory.NamedUserID(strings.TrimSpace(c.QueryParam("q")))
}

// handleUsers serves the tenant's users, filtered by ?q= (part of a user
// id, or a body user value: searchQuery).
func (u *UI) handleUsers(c echo.Context) error {
	users, err := u.deps.Inspect.Users(c.Request().Context(), tenantOf(c), searchQuery(c), maxUsersListed)
	if err != nil {
		return u.storeFailed(c, err)
	}
	// The box shows what was typed, bounded.
	typed := strings.TrimSpace(c.QueryParam("q"))
	typed = typed[:min(len(typed), 128)]
	return u.render(c, http.StatusOK, "users", page{Title: "Users", Nav: "users", Data: usersData{Query: typed, Users: users}})
}

// handleUsersJSON serves the same list as JSON, for the search box.
func (u *UI) handleUsersJSON(c echo.Context) error {
	users, err := u.deps.Inspect.Users(c.Request().Context(), tenantOf(c), searchQuery(c), maxUsersListed)
	if err != nil {
		u.log.Error("ui: memory store error", "error", err)
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"error": map[string]any{
			"message": "The memory store could not be reached.", "type": "server_error"}})
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "tenant": tenantOf(c), "data": users})
}

// userParam reads and checks the :user path parameter.
func (u *UI) userParam(c echo.Context) (string, bool) {
	user := c.Param("user")
	return user, memory.ValidID(user)
}

// userData is the user page's data.
type userData struct {
	Conversations []memory.Conversation
	Footprint     *memory.Footprint
}

// handleUser serves one user: their conversations, what is stored about
// them, and the erase form.
func (u *UI) handleUser(c echo.Context) error {
	user, ok := u.userParam(c)
	if !ok {
		return u.renderError(c, http.StatusBadRequest, "A user id is "+memory.IDChars+".")
	}
	ctx := c.Request().Context()
	convs, err := u.deps.Store.Conversations(ctx, tenantOf(c), user)
	if err != nil {
		return u.storeFailed(c, err)
	}
	d := userData{Conversations: convs}
	if u.deps.Footprint != nil {
		fp, err := u.deps.Footprint.Footprint(ctx, tenantOf(c), user)
		if err != nil {
			return u.storeFailed(c, err)
		}
		d.Footprint = &fp
	}
	return u.render(c, http.StatusOK, "user", page{Title: "User " + user, User: user, Nav: "conversations", Data: d})
}
