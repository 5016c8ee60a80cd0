package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/server"
)

// cookieName is the inspector's session cookie.
const cookieName = "memgate_ui"

// maxSessions bounds the sessions kept, maxSessionsPerKey those of one key
// (see sessions.create).
const (
	maxSessions       = 1024
	maxSessionsPerKey = 16
)

// session is one logged-in browser. The key stays on the server; it is
// checked again by the Guard on every request.
type session struct {
	id   string
	key  string
	csrf string
	// expires slides with use, never past ends, the absolute end fixed at
	// login.
	expires, ends time.Time
}

// sessions is the in-memory session table.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
	// ttl is the idle timeout, maxAge the absolute lifetime.
	ttl, maxAge time.Duration
	max         int
	now         func() time.Time
}

// newSessions returns a table of at most max sessions, each ending after
// ttl unused or maxAge after login; now is the clock.
func newSessions(ttl, maxAge time.Duration, max int, now func() time.Time) *sessions {
	return &sessions{m: map[string]*session{}, ttl: ttl, maxAge: maxAge, max: max, now: now}
}

// until returns when a session used at now expires: ttl later, but never
// after its absolute end.
func (s *sessions) until(now, ends time.Time) time.Time {
	if e := now.Add(s.ttl); e.Before(ends) {
		return e
	}
	return ends
}

// token returns 32 random bytes, base64url-encoded.
func token() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session for key. The table keeps at most max sessions,
// and one key at most maxSessionsPerKey: a login past either forgets the
// expired sessions, then the least recently used session of the key that
// holds the most (its own key's when that holds as many). A key logging
// in again and again thus ends its own sessions, never another key's
// while any key holds more: a tenant's gateway key cannot push the
// operator out. A wrong key gets no session at all (handleLogin).
func (s *sessions) create(key string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	held := map[string]int{}
	oldest := map[string]*session{}
	for _, x := range s.m {
		if !now.Before(x.expires) {
			delete(s.m, x.id)
			continue
		}
		held[x.key]++
		if o := oldest[x.key]; o == nil || x.expires.Before(o.expires) {
			oldest[x.key] = x
		}
	}
	if held[key] >= maxSessionsPerKey || len(s.m) >= s.max {
		victim := key
		for k, n := range held {
			if n > held[victim] || (n == held[victim] && k != victim && oldest[victim] != nil && oldest[k].expires.Before(oldest[victim].expires)) {
				victim = k
			}
		}
		if held[key] >= maxSessionsPerKey {
			victim = key
		}
		if v := oldest[victim]; v != nil {
			delete(s.m, v.id)
		}
	}
	ends := now.Add(s.maxAge)
	ss := &session{id: token(), key: key, csrf: token(), ends: ends, expires: s.until(now, ends)}
	s.m[ss.id] = ss
	return ss
}

// count returns how many sessions key holds.
func (s *sessions) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, x := range s.m {
		if x.key == key {
			n++
		}
	}
	return n
}

// get returns the live session id names, extending its idle timeout up to
// its absolute end, or nil.
func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[id]
	if ss == nil {
		return nil
	}
	now := s.now()
	if !now.Before(ss.expires) {
		delete(s.m, id)
		return nil
	}
	ss.expires = s.until(now, ss.ends)
	return ss
}

// drop ends a session.
func (s *sessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// sessionOf returns the request's session, or nil.
func (u *UI) sessionOf(c echo.Context) *session {
	ck, err := c.Cookie(cookieName)
	if err != nil || ck.Value == "" {
		return nil
	}
	return u.sessions.get(ck.Value)
}

// setCookie writes the session cookie (MaxAge < 0 deletes it).
func setCookie(c echo.Context, value string, maxAge int) {
	c.SetCookie(&http.Cookie{
		Name: cookieName, Value: value, Path: "/ui", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.Request().TLS != nil,
	})
}

// Context keys the middleware sets.
const (
	ctxSession = "ui.session"
	ctxTenant  = "ui.tenant"
)

// access runs the Guard for the request's session and the tenant it asks
// for.
func (u *UI) access(c echo.Context) (*session, string, error) {
	ss := u.sessionOf(c)
	if ss == nil {
		return nil, "", ErrDenied
	}
	tenant, err := u.deps.Guard(c.Request(), ss.key, c.QueryParam("tenant"))
	if err != nil {
		return nil, "", err
	}
	return ss, tenant, nil
}

// authed lets a page through only for a session whose key the Guard
// accepts; anyone else is sent to the login page, with no data.
func (u *UI) authed(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ss, tenant, err := u.access(c)
		switch {
		case errors.Is(err, ErrTenant):
			return u.renderError(c, http.StatusForbidden, "This key may not inspect that tenant.")
		case err != nil:
			if c.Request().Method != http.MethodGet {
				return u.renderError(c, http.StatusUnauthorized, "Log in again to make changes.")
			}
			return c.Redirect(http.StatusSeeOther, "/ui/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
		}
		c.Set(ctxSession, ss)
		c.Set(ctxTenant, tenant)
		return next(c)
	}
}

// authedJSON is authed for the JSON routes: 401 or 403 in OpenAI's error
// shape, never data.
func (u *UI) authedJSON(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ss, tenant, err := u.access(c)
		if err != nil {
			status, msg := http.StatusUnauthorized, "Log in to the inspector first."
			if errors.Is(err, ErrTenant) {
				status, msg = http.StatusForbidden, "This key may not inspect that tenant."
			}
			return c.JSON(status, map[string]any{"error": map[string]any{
				"message": msg, "type": "invalid_request_error", "code": "unauthorized"}})
		}
		c.Set(ctxSession, ss)
		c.Set(ctxTenant, tenant)
		return next(c)
	}
}

// csrf checks, on a state-changing request, the form's token against the
// session's and, when the browser sends one, that Origin is this host.
func (u *UI) csrf(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ss, _ := c.Get(ctxSession).(*session)
		if ss == nil || !sameOrigin(c.Request()) ||
			subtle.ConstantTimeCompare([]byte(c.FormValue("csrf")), []byte(ss.csrf)) != 1 {
			return u.renderError(c, http.StatusForbidden, "The form was stale or came from another site; reload the page and try again.")
		}
		return next(c)
	}
}

// sameOrigin reports whether a request's Origin header, when present, names
// the host it was sent to.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	ou, err := url.Parse(o)
	return err == nil && ou.Host == r.Host
}

// tenantOf returns the tenant the middleware resolved.
func tenantOf(c echo.Context) string { t, _ := c.Get(ctxTenant).(string); return t }

// sessionIn returns the session the middleware found.
func sessionIn(c echo.Context) *session { s, _ := c.Get(ctxSession).(*session); return s }

// handleLoginForm serves the login page.
func (u *UI) handleLoginForm(c echo.Context) error {
	return u.render(c, http.StatusOK, "login", page{Title: "Log in", Data: loginData{Next: safeNext(c.QueryParam("next"))}})
}

// loginData is the login page's data.
type loginData struct {
	Next  string
	Error string
}

// handleLogin checks the key with the Guard and starts a session.
func (u *UI) handleLogin(c echo.Context) error {
	next := safeNext(c.FormValue("next"))
	if !sameOrigin(c.Request()) {
		return u.renderError(c, http.StatusForbidden, "The login form came from another site.")
	}
	key := c.FormValue("key")
	if _, err := u.deps.Guard(c.Request(), key, ""); err != nil {
		server.ExchangeOf(c.Request().Context()).AuthFailed()
		return u.render(c, http.StatusUnauthorized, "login", page{Title: "Log in", Data: loginData{Next: next, Error: "That key is not accepted here."}})
	}
	ss := u.sessions.create(key)
	setCookie(c, ss.id, 0)
	return c.Redirect(http.StatusSeeOther, next)
}

// handleLogout ends the session.
func (u *UI) handleLogout(c echo.Context) error {
	if ss := sessionIn(c); ss != nil {
		u.sessions.drop(ss.id)
	}
	setCookie(c, "", -1)
	return c.Redirect(http.StatusSeeOther, "/ui/login")
}

// safeNext keeps a post-login redirect inside the inspector.
func safeNext(next string) string {
	if len(next) < 3 || next[:3] != "/ui" || (len(next) > 3 && next[3] != '/' && next[3] != '?') {
		return "/ui/users"
	}
	if u, err := url.Parse(next); err != nil || u.Host != "" || u.Scheme != "" {
		return "/ui/users"
	}
	return next
}
