package redact

import "strings"

// token is a kind of credential written as a literal prefix followed by a
// run of bytes of one class: API keys and access tokens of the common
// providers, JWTs, webhook URLs. Its scanner finds each prefix at the start
// of a word, takes the whole run of body bytes after it and asks secret for
// the secret in it; then it goes on after the run, so no byte is scanned
// twice however many prefixes a run holds.
type token struct {
	kind     string
	prefixes []string
	body     func(byte) bool
	// secret returns the span [from, to) of the secret, given that s[at:b]
	// is a prefix and s[b:end] the run of body bytes after it; ok is false
	// when there is none. It looks at no more than the run and the byte
	// after it.
	secret func(s string, at, b, end int) (from, to int, ok bool)
}

// tokenPrefix is one prefix of one token kind.
type tokenPrefix struct {
	token  int // index in tokens
	prefix string
}

// tokensByFirstByte lists the prefixes of every token by their first
// byte, in the order of tokens.
var tokensByFirstByte = func() (by [256][]tokenPrefix) {
	for k, t := range tokens {
		for _, p := range t.prefixes {
			by[p[0]] = append(by[p[0]], tokenPrefix{k, p})
		}
	}
	return by
}()

// findTokens returns the spans of the prefixed credentials in s, in one
// pass: at each word start it tries the prefixes that begin with its byte.
// After a kind's prefix has been tried, that kind's prefixes inside the run
// it took are not tried again, so each kind scans each byte once.
func findTokens(s string, m *meter) []span {
	var out []span
	var skip [len(tokens)]int // skip[k]: no prefix of tokens[k] is tried before it
	m.add(len(s))
	for i := 0; i < len(s); i++ {
		cands := tokensByFirstByte[s[i]]
		if len(cands) == 0 || i > 0 && isWordByte(s[i-1]) {
			continue
		}
		for _, c := range cands {
			if i < skip[c.token] || !strings.HasPrefix(s[i:], c.prefix) {
				continue
			}
			t := &tokens[c.token]
			b := i + len(c.prefix)
			end := runEnd(s, b, t.body, m)
			skip[c.token] = end
			if from, to, ok := t.secret(s, i, b, end); ok {
				out = append(out, span{from, to, t.kind})
				i = to - 1
				break
			}
		}
	}
	return out
}

// Byte classes of token bodies.
func isAlnumDash(c byte) bool    { return isWordByte(c) || c == '-' }
func isAlnumDashDot(c byte) bool { return isWordByte(c) || c == '-' || c == '.' }
func isUpperDigit(c byte) bool   { return c >= 'A' && c <= 'Z' || isDigit(c) }
func isURLPathByte(c byte) bool  { return isWordByte(c) || c == '-' || c == '/' }

// atLeast accepts a body (after the prefix, without a final full stop) of
// n bytes or more that, when mix is set, looks generated: a digit, or upper-
// and lower-case letters.
func atLeast(n int, mix bool) func(s string, at, b, end int) (int, int, bool) {
	return func(s string, at, b, end int) (int, int, bool) {
		end = trimDots(s, b, end)
		if end-b < n || mix && !random(s[b:end]) {
			return 0, 0, false
		}
		return at, end, true
	}
}

// exactly accepts a body of n bytes that no word byte follows.
func exactly(n int) func(s string, at, b, end int) (int, int, bool) {
	return func(s string, at, b, end int) (int, int, bool) {
		if end-b != n || end < len(s) && isWordByte(s[end]) {
			return 0, 0, false
		}
		return at, end, true
	}
}

// trimDots returns end moved back over the dots that end s[from:end] (the
// full stop of a sentence).
func trimDots(s string, from, end int) int {
	for end > from && s[end-1] == '.' {
		end--
	}
	return end
}

// random reports whether s looks generated rather than written: it has a
// digit, or both upper- and lower-case letters.
func random(s string) bool {
	var upper, lower bool
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isDigit(c):
			return true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		}
	}
	return upper && lower
}

// tokens are the prefixed credentials, most specific first.
var tokens = [...]token{
	// JWTs: three base64url segments, the first a JSON header ("eyJ"); a
	// JWE's five segments are taken whole.
	{kind: "jwt", prefixes: []string{"eyJ"}, body: isAlnumDashDot, secret: jwtSecret},
	// OpenAI (sk-, sk-proj-, sk-svcacct-, sk-admin-) and Anthropic (sk-ant-).
	{kind: "openai_key", prefixes: []string{"sk-"}, body: isAlnumDash, secret: atLeast(20, true)},
	// Stripe secret, restricted and webhook signing keys.
	{kind: "stripe_key", prefixes: []string{"sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"}, body: isAlnum, secret: atLeast(16, true)},
	// AWS access key ids: a four-letter kind and 16 upper-case letters or digits.
	{kind: "aws_access_key", prefixes: []string{"AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"}, body: isUpperDigit, secret: exactly(16)},
	// GitHub tokens: classic (ghp_, gho_, ghu_, ghs_, ghr_) and fine-grained.
	{kind: "github_token", prefixes: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, body: isAlnum, secret: atLeast(36, false)},
	{kind: "github_token", prefixes: []string{"github_pat_"}, body: isWordByte, secret: atLeast(22, false)},
	// GitLab personal, deploy, runner, trigger, feed and other tokens.
	{kind: "gitlab_token", prefixes: []string{"glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glimt-", "glcbt-", "gloas-", "glsoat-", "glagent-"}, body: isAlnumDashDot, secret: atLeast(20, false)},
	// Slack bot, user, app and configuration tokens.
	{kind: "slack_token", prefixes: []string{"xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-", "xoxe-", "xapp-"}, body: isAlnumDash, secret: atLeast(10, false)},
	// Slack and Discord webhook URLs: the path after the fixed part is the
	// secret.
	{kind: "slack_webhook", prefixes: []string{"hooks.slack.com/services/", "hooks.slack.com/workflows/", "hooks.slack.com/triggers/"}, body: isURLPathByte, secret: webhookSecret},
	{kind: "discord_webhook", prefixes: []string{"discord.com/api/webhooks/", "discordapp.com/api/webhooks/"}, body: isURLPathByte, secret: webhookSecret},
	// Google API keys: "AIza" and 35 more bytes.
	{kind: "google_api_key", prefixes: []string{"AIza"}, body: isAlnumDash, secret: atLeast(35, false)},
	// Hugging Face user access tokens.
	{kind: "huggingface_token", prefixes: []string{"hf_"}, body: isAlnum, secret: atLeast(30, true)},
	// SendGrid: "SG." and two base64url parts.
	{kind: "sendgrid_key", prefixes: []string{"SG."}, body: isAlnumDashDot, secret: sendgridSecret},
	// npm access tokens.
	{kind: "npm_token", prefixes: []string{"npm_"}, body: isAlnum, secret: atLeast(36, false)},
	// PyPI upload tokens (a macaroon).
	{kind: "pypi_token", prefixes: []string{"pypi-AgE"}, body: isAlnumDash, secret: atLeast(50, false)},
	// Shopify access tokens and shared secrets: 32 hex digits.
	{kind: "shopify_token", prefixes: []string{"shpat_", "shpss_", "shpca_", "shppa_"}, body: isHex, secret: atLeast(32, false)},
	// DigitalOcean personal, OAuth and refresh tokens: 64 hex digits.
	{kind: "digitalocean_token", prefixes: []string{"dop_v1_", "doo_v1_", "dor_v1_"}, body: isHex, secret: atLeast(64, false)},
	// Twilio API key SIDs: "SK" and 32 hex digits.
	{kind: "twilio_key", prefixes: []string{"SK"}, body: isHex, secret: exactly(32)},
}

// jwtSecret accepts a run that starts like a JWT: a header segment of at
// least 11 bytes ("eyJ" and 8), a payload of at least 4, and a signature,
// possibly empty; further segments (JWE) are part of it.
func jwtSecret(s string, at, b, end int) (int, int, bool) {
	run := s[at:end]
	d1 := strings.IndexByte(run, '.')
	if d1 < 11 {
		return 0, 0, false
	}
	d2 := strings.IndexByte(run[d1+1:], '.')
	if d2 < 4 {
		return 0, 0, false
	}
	if sig := at + d1 + 1 + d2 + 1; trimDots(s, sig, end) > sig {
		end = trimDots(s, sig, end) // a full stop after the signature is prose
	} else {
		end = sig // an empty signature keeps its dot
	}
	return at, end, true
}

// sendgridSecret accepts "SG." and two base64url parts of 16 bytes or more.
func sendgridSecret(s string, at, b, end int) (int, int, bool) {
	end = trimDots(s, b, end)
	body := s[b:end]
	dot := strings.IndexByte(body, '.')
	if dot < 16 || len(body)-dot-1 < 16 || strings.IndexByte(body[dot+1:], '.') >= 0 {
		return 0, 0, false
	}
	return at, end, true
}

// webhookSecret accepts the path after a webhook URL's fixed part when it
// has two segments or more and 20 bytes or more; the secret is that path,
// the URL's host stays readable.
func webhookSecret(s string, at, b, end int) (int, int, bool) {
	for end > b && s[end-1] == '/' {
		end--
	}
	if end-b < 20 || strings.IndexByte(s[b:end], '/') < 0 {
		return 0, 0, false
	}
	return b, end, true
}
