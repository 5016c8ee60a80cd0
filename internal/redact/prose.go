package redact

import "strings"

// Passwords and PINs stated in prose: "my password is hunter2", "the wifi
// password is 'correct horse'", "my pin is 4821", "my API key is ...", "a
// minha senha é hunter2", "minha senha do banco: abc123". findProse looks
// for a credential noun (password, passcode, passphrase, PIN, access or
// one-time code, token, API key, senha, palavra-passe, código de acesso),
// then, within a few words, a verb or a colon ("is", "was",
// "é", "era", ":"), and takes the word after it as the secret when it
// looks like one. A word with a digit or a symbol always does; a plain word
// only after a possessive or an article ("my", "the", "a minha") and when it
// is not a common word ("is too short", "é fraca", "was changed"). A PIN is
// digits, a token or a key looks generated. Counts ("is 12 characters
// long") are left alone.

// maxLookahead bounds how far after a noun the verb and the value are
// looked for, so each noun costs a bounded amount of work.
const maxLookahead = 96

// maxValueProbe is how much of a value is looked at to decide whether it
// is a secret; an accepted value is taken whole.
const maxValueProbe = 64

// word is the span of a word in a text; the zero word is none.
type word struct{ start, end int }

// isProseLetter reports whether c is part of a word: an ASCII letter or a
// byte of a multi-byte UTF-8 character (é, ç, ñ).
func isProseLetter(c byte) bool { return isLetter(c) || c >= 0x80 }

// findProse returns the spans of the passwords and PINs stated in s.
func findProse(s string, m *meter) []span {
	var out []span
	var prev [3]word // the last words, most recent first
	for i := 0; i < len(s); {
		if !isProseLetter(s[i]) {
			i++
			m.add(1)
			continue
		}
		w := word{i, runEnd(s, i, isProseLetter, m)}
		if kind := nounKind(s, w, prev); kind != "" {
			if sp, end, ok := proseValue(s, w, determined(s, w, prev), kind, m); ok {
				out = append(out, sp)
				i = end
				prev = [3]word{}
				continue
			}
		}
		prev[2], prev[1], prev[0] = prev[1], prev[0], w
		i = w.end
	}
	return out
}

// lower returns the word lower-cased into buf, or "" when it is longer than
// buf. Comparing the result with literals does not allocate.
func lower(s string, w word, buf *[16]byte) []byte {
	if w.end-w.start > len(buf) || w.end <= w.start {
		return nil
	}
	b := buf[:0]
	for i := w.start; i < w.end; i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// nounKind returns the kind of credential w names ("password", "pin",
// "token", "api_key"), given the words before it, or "".
func nounKind(s string, w word, prev [3]word) string {
	if n := w.end - w.start; n < 3 || n > 13 || strings.IndexByte("pPsScCkKtT", s[w.start]) < 0 {
		return ""
	}
	var buf [16]byte
	switch string(lower(s, w, &buf)) {
	case "password", "passwd", "passcode", "passphrase", "senha", "contraseña":
		return "password"
	case "pin":
		return "pin"
	case "token":
		return "token"
	case "key":
		var pb [16]byte
		switch string(lower(s, prev[0], &pb)) {
		case "api", "secret", "access", "license", "licence", "product", "activation":
			if blanks(s, prev[0].end, w.start) {
				return "api_key"
			}
		}
	case "passe": // palavra-passe
		var pb [16]byte
		if prev[0].end == w.start-1 && s[prev[0].end] == '-' && string(lower(s, prev[0], &pb)) == "palavra" {
			return "password"
		}
	case "code", "código", "codigo":
		var pb [16]byte
		switch string(lower(s, prev[0], &pb)) {
		case "access", "security", "door", "alarm", "gate", "entry", "garage", "safe", "lock", "unlock", "verification",
			"pin", "time", "confirmation", "recovery", "backup", "otp", "mfa", "login", "auth", "authentication", "sms":
			if blanks(s, prev[0].end, w.start) {
				return "pin"
			}
		}
		for _, q := range codeQualifiers { // "código de acesso"
			if len(s)-w.end >= len(q) && strings.EqualFold(s[w.end:w.end+len(q)], q) {
				return "pin"
			}
		}
	}
	return ""
}

// codeQualifiers make "código" a PIN in Portuguese.
var codeQualifiers = []string{" de acesso", " de segurança", " de seguranca", " do alarme", " do portão", " do portao",
	" de verificação", " de verificacao", " de desbloqueio", " pin"}

// blanks reports whether s[i:j] is one to four spaces or tabs.
func blanks(s string, i, j int) bool {
	if j <= i || j-i > 4 {
		return false
	}
	for k := i; k < j; k++ {
		if s[k] != ' ' && s[k] != '\t' {
			return false
		}
	}
	return true
}

// determined reports whether a possessive or an article comes before the
// noun w, with at most two words between them ("my wifi password", "a
// minha senha", "the admin password").
func determined(s string, w word, prev [3]word) bool {
	next := w
	for _, p := range prev {
		if p.end == 0 || !blanks(s, p.end, next.start) {
			return false
		}
		var buf [16]byte
		switch string(lower(s, p, &buf)) {
		case "my", "our", "the", "your", "his", "her", "their", "this",
			"minha", "meu", "a", "o", "sua", "seu", "nossa", "nosso", "tua", "teu", "mi", "su", "tu", "la", "el":
			return true
		}
		next = p
	}
	return false
}

// proseValue parses what follows the noun w: up to a few words ("code",
// "number", or a phrase after "for", "of", "do", "da"...), a verb or a
// colon, and the value. It returns the value's span and where scanning may
// go on.
func proseValue(s string, w word, det bool, kind string, m *meter) (sp span, next int, ok bool) {
	limit := min(len(s), w.end+maxLookahead)
	defer func() { m.add(min(max(next, w.end), limit) - w.end) }()
	j := w.end
	verb := ""
	if strings.HasPrefix(s[j:], "'s ") || strings.HasPrefix(s[j:], "’s ") {
		verb = "is"
		j = strings.IndexByte(s[j:], ' ') + j
	}
	for words, inPhrase := 0, false; verb == "" && words < 5; words++ {
		k := skipBlanks(s, j)
		if k >= limit {
			return span{}, w.end, false
		}
		if s[k] == ':' {
			verb, j = ":", k+1
			break
		}
		if !isProseLetter(s[k]) {
			return span{}, w.end, false
		}
		x := word{k, k} // a word, hyphenated ones ("e-mail") whole
		for x.end < limit && (isProseLetter(s[x.end]) || s[x.end] == '-' && x.end+1 < limit && isProseLetter(s[x.end+1])) {
			x.end++
		}
		var buf [16]byte
		lx := string(lower(s, x, &buf))
		switch {
		case lx == "is" || lx == "was" || lx == "é" || lx == "era" || lx == "es" || lx == "e":
			verb, j = lx, x.end
		case words == 0 && (lx == "code" || lx == "number" || lx == "código" || lx == "codigo" || lx == "número" || lx == "numero"):
			j = x.end
		case lx == "for" || lx == "to" || lx == "of" || lx == "on" || lx == "at" || lx == "do" || lx == "da" || lx == "de" ||
			lx == "no" || lx == "na" || lx == "dos" || lx == "das" || lx == "para" || lx == "pra" || lx == "pro":
			inPhrase, j = true, x.end
		case inPhrase && lx != "":
			j = x.end
		default:
			return span{}, w.end, false
		}
	}
	if verb == "" {
		return span{}, w.end, false
	}
	k := skipBlanks(s, j)
	if verb != ":" && k < len(s) && s[k] == ':' {
		k = skipBlanks(s, k+1)
	}
	// An adverb between the verb and the value: "is now", "é agora".
	if x := (word{k, runEnd(s[:limit], min(k, limit), isProseLetter, m)}); x.end > x.start {
		var buf [16]byte
		switch string(lower(s, x, &buf)) {
		case "now", "still", "actually", "currently", "agora", "ainda", "atualmente":
			k = skipBlanks(s, x.end)
		}
	}
	for _, future := range []string{"going to be ", "gonna be ", "vai ser "} {
		if limit-k > len(future) && strings.EqualFold(s[k:k+len(future)], future) {
			k = skipBlanks(s, k+len(future))
		}
	}
	if k >= limit || s[k] == '\n' || s[k] == '\r' || redactedAt(s, k) {
		return span{}, w.end, false
	}
	if q := s[k]; q == '"' || q == '\'' || q == '`' {
		e := strings.IndexByte(s[k+1:min(len(s), k+1+maxValueProbe)], q)
		if e <= 0 || strings.IndexByte(s[k+1:k+1+e], '\n') >= 0 {
			return span{}, w.end, false
		}
		return span{k + 1, k + 1 + e, kind}, k + 2 + e, true
	}
	e := k
	for e < len(s) && e-k < maxValueProbe && !isSpace(s[e]) {
		e++
	}
	t := e
	for t > k && strings.IndexByte(".,;:!?)]}\"'", s[t-1]) >= 0 {
		t--
	}
	if t == k || !secretWord(s[k:t], kind, det, verb == "e") || countFollows(s, e) {
		return span{}, w.end, false
	}
	if verb == ":" && !strongWord(s[k:t]) && !clauseEnds(s, t) {
		return span{}, w.end, false // "The password: nobody knows it"
	}
	if e-k == maxValueProbe { // take the whole value
		e = runEnd(s, e, func(c byte) bool { return !isSpace(c) }, m)
		t = e
		for t > k && strings.IndexByte(".,;:!?)]}\"'", s[t-1]) >= 0 {
			t--
		}
	}
	return span{k, t, kind}, e, true
}

// secretWord reports whether v, said to be a credential of the kind, looks
// like one: a PIN is three digits or more; a token or an API key looks
// generated; a password has a digit, a symbol or an inner capital, or is a
// plain word that is not a common one, said after a possessive or an
// article.
func secretWord(v, kind string, det, weakVerb bool) bool {
	if i := strings.IndexByte(v, '='); i > 0 && strings.Trim(v[i:], "=") != "" {
		return false // an assignment ("expires_in=3600"), not a value
	}
	switch kind {
	case "pin":
		return len(v) >= 3 && strings.Trim(v, "0123456789") == ""
	case "token", "api_key":
		return len(v) >= 8 && credentialLike(v)
	}
	if strongWord(v) {
		return len(v) >= 3
	}
	if !det || weakVerb || len(v) < 3 {
		return false
	}
	lv := strings.ToLower(v)
	if commonWord[lv] {
		return false
	}
	for _, suf := range []string{"ed", "ly", "ing", "ado", "ada", "ido", "ida", "mente"} {
		if strings.HasSuffix(lv, suf) && len(lv) > len(suf)+2 {
			return false
		}
	}
	if strings.IndexByte(lv, '-') >= 0 {
		for part := range strings.SplitSeq(lv, "-") {
			if commonWord[part] {
				return false
			}
		}
	}
	return true
}

// strongWord reports whether v looks made up: it has a digit, a symbol
// other than a hyphen or an apostrophe, or a capital letter after its
// first.
func strongWord(v string) bool {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case isDigit(c), c >= 'A' && c <= 'Z' && i > 0:
			return true
		case isProseLetter(c), c == '-', c == '\'':
		default:
			return true
		}
	}
	return false
}

// clauseEnds reports whether nothing but a punctuation mark and blanks
// follow s[i] before the end of the line.
func clauseEnds(s string, i int) bool {
	for ; i < len(s); i++ {
		switch s[i] {
		case '.', ',', ';', '!', '?', ' ', '\t', ')':
		case '\n', '\r':
			return true
		default:
			return false
		}
	}
	return true
}

// countFollows reports whether the word after s[i] makes the value a count
// ("12 characters long", "4 dígitos").
func countFollows(s string, i int) bool {
	k := skipBlanks(s, i)
	x := word{k, k}
	for x.end < len(s) && x.end-k < 16 && isProseLetter(s[x.end]) {
		x.end++
	}
	var buf [16]byte
	switch string(lower(s, x, &buf)) {
	case "characters", "character", "chars", "char", "digits", "digit", "letters", "letter", "long", "numbers",
		"symbols", "words", "caracteres", "caractere", "dígitos", "digitos", "letras", "números", "numeros", "palavras":
		return true
	}
	return false
}

// commonWord are words that follow "my password is" without being the
// password: function words, and what people say about passwords, in English
// and Portuguese.
var commonWord = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
a an the my your his her our their its this that these those it not too very so just also still now only really
quite pretty way much more less most least same different wrong right correct incorrect invalid valid weak strong
secure insecure safe unsafe long longer short shorter simple easy hard difficult complex good bad great fine ok okay
new old current default temporary required needed necessary missing empty blank case something nothing anything
everything what which who how where when why in on at for to of from with without by about like as and or but if
because being been be always never sometimes probably definitely literally actually basically mandatory optional
unique random obvious known unknown public private secret hidden visible shared personal important useless there
here one two three four five six seven eight nine ten some any all no yes none set reset done gone due over under up
down out off broken lost stolen terrible awful horrible awesome perfect fantastic funny ridiculous stupid silly dumb
crazy insane impossible annoying better worse stronger weaker similar identical unchanged mine yours hers theirs
ours either neither nobody somebody everybody anybody someone everyone anyone noone exactly almost nearly then than supposed going getting saved written stored somewhere
case-sensitive also usually generally far enough unknown sensitive insecure predictable guessable memorable
complicated expired encrypted hashed changed
o os as um uma uns umas de do da dos das em no na nos nas que qual quem como onde quando porque muito muita pouco
pouca bem mal mais menos tão mesma mesmo igual diferente errada errado certa certo correta correto incorreta
incorreto inválida invalida válida valida fraca fraco forte segura seguro insegura longa longo curta curto grande
pequena simples fácil facil difícil dificil complicada complexa nova novo velha antiga atual padrão padrao
temporária temporaria obrigatória obrigatoria necessária necessaria vazia minha meu sua seu nossa nosso essa esse
esta este isso isto aquela aquele não nao sim também tambem ainda agora já ja só apenas sempre nunca secreta pessoal
importante única unica aleatória aleatoria óbvia obvia boa bom ruim ótima otima péssima pessima horrível horrivel
ninguém ninguem alguém alguem todos todo para pra pro por com sem sobre entre até ate ou mas se ser estar está esta bastante super demais parecida
la el mi tu su muy es
`) {
		m[w] = true
	}
	return m
}()
