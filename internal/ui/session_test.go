package ui

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestSessionLifetime: a session slides with use but ends at its absolute
// lifetime however busy it is (finding 9), and ends after its idle timeout
// unused.
func TestSessionLifetime(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	s := newSessions(time.Hour, 3*time.Hour, 10, clock)

	busy := s.create("k")
	for i := 0; i < 20; i++ { // used every 10 minutes for 3h20m
		now = now.Add(10 * time.Minute)
		got := s.get(busy.id)
		if past := now.Sub(busy.ends) >= 0; past != (got == nil) {
			t.Fatalf("at +%v: session live=%v, past its end=%v", time.Duration(i+1)*10*time.Minute, got != nil, past)
		}
	}
	if s.get(busy.id) != nil {
		t.Fatal("a busy session outlived its absolute lifetime")
	}

	idle := s.create("k")
	now = now.Add(59 * time.Minute)
	if s.get(idle.id) == nil {
		t.Fatal("session ended before its idle timeout")
	}
	now = now.Add(time.Hour)
	if s.get(idle.id) != nil {
		t.Fatal("session outlived its idle timeout")
	}
}

// TestSessionCapKeepsOtherKeysSessions: at the table's cap, a login
// forgets a session of the key holding the most, never the one session
// of another key. Before, the least recently used session went whoever
// held it: a tenant's gateway key, logging in max times, ended the
// operator's admin session. A wrong key never gets a session at all
// (handleLogin checks it first; TestWrongLoginsOpenNoSession).
func TestSessionCapKeepsOtherKeysSessions(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	for _, tt := range []struct {
		name string
		max  int
	}{
		{"under the per-key cap", maxSessionsPerKey * 4},
		{"table smaller than the per-key cap", 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newSessions(time.Hour, 3*time.Hour, tt.max, clock)
			operator := s.create("admin")
			for i := 0; i < 3*tt.max; i++ {
				now = now.Add(time.Second) // the operator's session is the least recently used
				if s.create("tenant-key") == nil {
					t.Fatalf("login %d refused", i)
				}
			}
			if s.get(operator.id) == nil {
				t.Fatal("another key's logins ended the operator's session")
			}
			if n := len(s.m); n > tt.max {
				t.Fatalf("%d sessions kept, cap %d", n, tt.max)
			}
			if n := s.count("tenant-key"); n > maxSessionsPerKey {
				t.Fatalf("one key holds %d sessions, want at most %d", n, maxSessionsPerKey)
			}
		})
	}
}

// TestWrongLoginsOpenNoSession: logins with a wrong key, more of them
// than the table holds, open no session and leave the operator's live.
func TestWrongLoginsOpenNoSession(t *testing.T) {
	h := uiHandler(t, mustStore(t), adminGuard())
	post := func(key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader(url.Values{"key": {key}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = "192.0.2.1:1234"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	ok := post(adminKey)
	if ok.Code != http.StatusSeeOther || len(ok.Result().Cookies()) != 1 {
		t.Fatalf("operator login: status %d", ok.Code)
	}
	for i := 0; i < maxSessions+10; i++ {
		if rec := post("wrong"); rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 {
			t.Fatalf("wrong key %d: status %d, %d cookies", i, rec.Code, len(rec.Result().Cookies()))
		}
	}
	req := httptest.NewRequest(http.MethodGet, "/ui/users", nil)
	req.AddCookie(ok.Result().Cookies()[0])
	req.RemoteAddr = "192.0.2.1:1234"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("operator's session after wrong logins: status %d", rec.Code)
	}
}
