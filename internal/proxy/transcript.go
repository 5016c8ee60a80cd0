package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/memgate/memgate/internal/memory"
)

// Chat apps send requests about a conversation beside its turns, through
// the same endpoint and key: a title, tags, follow-up questions (Open
// WebUI, LibreChat, LobeChat, big-AGI…). Each is one user message holding
// the app's instructions and a transcript of the chat's last messages,
// ending with the newest reply. Stored, it would be a turn the user never
// said (its instructions and the model's title recalled as the user's
// words, the transcript stored a second time), and it would be answered
// with memory it does not need.
//
// transcripts tells such a request by its structure, not by any app's
// wording: a request whose only message (system ones aside) is a user
// message, or that holds system messages alone (LibreChat's title request,
// one system message; its last one is read), that quotes, in order, the opening words of the user's turn, the
// opening words of its reply and the closing words of that reply, of one
// of the user's newest captured exchanges, and ends there: at most
// transcriptTailWords words follow the reply's closing (a closing label,
// Open WebUI's "</chat_history>", LibreChat's "||>Title:"). A user who
// quotes their own earlier words, or the assistant's, quotes one role and
// is not matched. An app that pastes the conversation so far into each new
// user message ("Human: …\nAI: …\nHuman: {input}\nAI:") quotes the newest
// exchange too, but its message goes on with the user's new words: it is
// a turn, and stored — unless those words and its labels are
// transcriptTailWords words or fewer (a bare "thanks" after the reply), a turn then
// taken for a request about the chat and not stored.
//
// Other apps put their instructions after the transcript (LobeChat's
// title, in Chinese in its older versions; Chatbox's, which also cuts each
// message to its first 100 characters), or quote the newest exchange and
// then the user's next message, not answered yet (Open WebUI's search and
// retrieval queries). For a user seen resending their history
// (Proxy.resenders: their app sends each chat's whole history, so a single
// message is at most a new chat's first turn) a request is about the chat
// too when it quotes the user's whole turn with the reply's opening right
// after it (at most transcriptTailWords words between: a role label), the
// reply whole or past its long opening (transcriptLongWords words), and
// does not end with the word that introduced the reply: a pasted history
// ends with that label ("AI:"), asking for the next reply. A user quoting
// the exchange with words of their own between its two messages, or
// quoting the reply's first sentence only, is not matched. A single
// message that pastes the user's whole newest exchange, role labels at
// most between its messages, and asks about it is taken for the app's
// request when its user's app resends history (its first chat aside:
// before a resend is seen, such requests are stored as before); so is a
// pasted history that ends with the user's new message and no label.
//
// It keeps, per user, prints of the newest exchanges (a hash and a length
// in words, never the text) for transcriptMaxAge, in an LRU of
// transcriptUsers users; each request only matches its own user's. An
// opening print covers the first line of a message holding words, up to
// transcriptWords words; a closing print the message's last
// transcriptWords words, across its lines (so that a reply ending with a
// one-word line, "Enjoy!", is not found at the end of any text ending
// with that word). Words are runs of letters and
// digits, case folded (each letter of a script written without spaces is
// a word; a backslash and the letter of a JSON escape of white space,
// \n, \r, \t, \b, \f, separate words): a transcript that prefixes each line
// with a role name, quotes it or escapes it into JSON still holds the
// same words in the same order. A word's hash is FNV-1a seeded by the
// user's key, the same in every process (and no two users' prints of the
// same words alike). A check hashes the request's words once
// and looks for each print in one pass: its work grows with the message's
// length times the prints kept (transcriptPairs pairs).
//
// Gateway processes behind one load balancer share the prints through a
// PrintStore (Redis): an app's request that reaches another process than
// its chat's turns is told by the prints the turn's process wrote there.
// Each process keeps its own too, and checks them first: the shared
// prints are read (one round trip, within the store's timeout) only for a
// request of the candidate shape, long enough to quote a pair, that its
// own prints do not match, and while the request's memory loads, as a
// turn's would (check; the proxy takes the answer before it forwards or
// captures anything); a read that fails or is late leaves the answer to
// its own (X-Memory-Degraded: transcripts). Without a
// PrintStore the prints are per process: a request that reaches another
// process than its chat's turns is stored as before.

const (
	// transcriptPairs is how many of a user's newest exchanges are kept.
	transcriptPairs = 4
	// transcriptWords is the most words of a message's opening a print covers.
	transcriptWords = 8
	// transcriptLongWords is the most words of a reply's long opening: an
	// app that cuts each message of its transcript (Chatbox, to 100
	// characters) quotes this many of the reply's first words, more than
	// a user quoting its first sentence back.
	transcriptLongWords = 12
	// transcriptMinWords is the fewest words a pair's two prints must cover
	// together: a greeting and a one-word reply are found in any text, and
	// a user may quote a short exchange back while asking on ("What is the
	// capital of France? Paris. And of Spain?"), a turn memgate must store.
	transcriptMinWords = 10
	// transcriptTailWords is the most words a request about the chat may
	// hold after the quoted reply's closing: the app's closing label
	// (Open WebUI's "</chat_history>", two words; LibreChat's "||>Title:",
	// one). More is taken for new words of the user's: a turn (a pasted
	// history's "Human: ok\nAI:" is three words, and stored).
	transcriptTailWords = 2
	// transcriptMaxAge is how long an exchange is kept: apps ask about a
	// chat right after its reply (a title, tags, follow-ups), or a while
	// later (a title regenerated, tags asked again).
	transcriptMaxAge = 30 * time.Minute
	// transcriptUsers bounds the users remembered.
	transcriptUsers = 4096
	// forgetTimeout bounds the deletion of an erased user's shared prints.
	forgetTimeout = 2 * time.Second
	// printsTimeout bounds each read and write of the shared prints when
	// Options.PrintsTimeout does not say.
	printsTimeout = 150 * time.Millisecond
	// wordBase is the polynomial base of the word-sequence hash (odd).
	wordBase uint64 = 0x100000001b3
)

// quotePrint is the print of a message's opening: the hash of its words
// in order and how many they are.
type quotePrint struct {
	hash  uint64
	words int
}

// pairPrint is one exchange's prints: the opening and closing of the
// user's turn, and the opening, long opening and closing of the reply.
type pairPrint struct {
	user, reply, end quotePrint
	// userEnd is the closing of the user's turn; long the reply's first
	// transcriptLongWords words, across its lines.
	userEnd, long quotePrint
	at            time.Time
}

// userTurns is a user's newest exchanges, the newest last.
type userTurns struct {
	mu    sync.Mutex
	pairs []pairPrint
}

// PrintStore keeps the prints of each user's newest exchanges where every
// gateway process sharing it reads them (implemented by
// internal/store/redis.Prints). A user is named by a digest of their
// tenant and user (transcriptKey), a print is opaque bytes (never text);
// each call is one round trip, bounded by its context.
type PrintStore interface {
	// Prints returns the prints kept for user, newest first.
	Prints(ctx context.Context, user [32]byte) ([][]byte, error)
	// AddPrint keeps print as user's newest, keeps the keep newest, and
	// makes them expire ttl from now.
	AddPrint(ctx context.Context, user [32]byte, print []byte, keep int, ttl time.Duration) error
	// ForgetPrints drops every print kept for user.
	ForgetPrints(ctx context.Context, user [32]byte) error
}

// transcripts is the table, safe for concurrent use.
type transcripts struct {
	lru *lru.Cache[prefixKey, *userTurns]
	now func() time.Time
	// shared are the prints the gateway processes share (nil: none);
	// timeout bounds each read and write of them.
	shared  PrintStore
	timeout time.Duration

	// mu orders the forgets with the exchanges' prints kept after them:
	// gen counts the users' forgets; forgot holds the count at each of
	// the last transcriptUsers users' forgets, floor the highest count
	// forgot evicted. An exchange received at a count a later forget of
	// its user may have passed (forgotSince) is erased data: its prints
	// are not kept.
	mu     sync.Mutex
	gen    uint64
	forgot *lru.Cache[prefixKey, uint64]
	floor  uint64
}

func newTranscripts(now func() time.Time, shared PrintStore, timeout time.Duration) *transcripts {
	c, _ := lru.New[prefixKey, *userTurns](transcriptUsers) // errors only on a size <= 0
	t := &transcripts{lru: c, now: now, shared: shared, timeout: timeout}
	// Called under t.mu, by forgot.Add.
	t.forgot, _ = lru.NewWithEvict(transcriptUsers, func(_ prefixKey, gen uint64) { t.floor = max(t.floor, gen) })
	return t
}

// generation returns the count of forgets so far, which an exchange takes
// when its request arrives (rememberSince, shareSince).
func (t *transcripts) generation() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gen
}

// forgotSince reports whether the user k may have been forgotten (erased,
// or a conversation of theirs deleted) since the count gen; t.mu is held.
func (t *transcripts) forgotSince(k prefixKey, gen uint64) bool {
	at, ok := t.forgot.Peek(k)
	return ok && at > gen || t.floor > gen
}

// transcriptKey is a user's key in the table and in the shared prints.
func transcriptKey(tenant, user string) prefixKey { return userKey("transcript", tenant, user) }

// userKey is a digest of tenant and user, for what is kept per user under
// label.
func userKey(label, tenant, user string) prefixKey {
	h := sha256.New()
	for _, s := range []string{label, tenant, user} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var k prefixKey
	h.Sum(k[:0])
	return k
}

// seedOf is the seed of the user k's word hashes.
func seedOf(k prefixKey) uint64 { return binary.BigEndian.Uint64(k[:8]) }

// FNV-1a's 64-bit offset basis and prime.
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

// unspaced are the scripts written without spaces between words: each of
// their letters counts as a word.
var unspaced = []*unicode.RangeTable{unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar}

// words calls f with the hash of each word of s, in order, seeded by
// seed: its runs of letters and digits, case folded, and each letter of a
// script written without spaces. A backslash and the letter after it of a
// JSON escape of white space (\n, \r, \t, \b, \f) separate words, so
// that a reply's line after a newline holds the same words JSON-escaped.
func words(seed uint64, s string, f func(h uint64)) {
	start := fnvOffset ^ seed
	h := start
	in, escaped := false, false
	var buf [utf8.UTFMax]byte
	write := func(b []byte) {
		for _, c := range b {
			h = (h ^ uint64(c)) * fnvPrime
		}
	}
	for _, r := range s {
		if escaped {
			escaped = false
			if r == 'n' || r == 'r' || r == 't' || r == 'b' || r == 'f' {
				continue
			}
		}
		if r == '\\' {
			escaped = true
		}
		if r >= 0x0E00 && unicode.IsOneOf(unspaced, r) {
			if in {
				f(h)
				h = start
				in = false
			}
			n := utf8.EncodeRune(buf[:], r)
			write(buf[:n])
			f(h)
			h = start
			continue
		}
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			n := utf8.EncodeRune(buf[:], unicode.ToLower(r))
			write(buf[:n])
			in = true
			continue
		}
		if in {
			f(h)
			h = start
			in = false
		}
	}
	if in {
		f(h)
	}
}

// opening returns the print of text's opening, its words seeded by seed:
// the words of its first line holding any, up to transcriptWords.
func opening(seed uint64, text string) quotePrint {
	var p quotePrint
	for line := range strings.Lines(text) {
		words(seed, line, func(w uint64) {
			if p.words < transcriptWords {
				p.hash = p.hash*wordBase + w
				p.words++
			}
		})
		if p.words > 0 {
			break
		}
	}
	return p
}

// longOpening returns the print of text's first words, up to
// transcriptLongWords, across its lines, seeded by seed.
func longOpening(seed uint64, text string) quotePrint {
	var p quotePrint
	words(seed, text, func(w uint64) {
		if p.words < transcriptLongWords {
			p.hash = p.hash*wordBase + w
			p.words++
		}
	})
	return p
}

// closing returns the print of text's closing, its words seeded by seed:
// its last words, up to transcriptWords, across its lines (a reply's last
// line is often one or two words, "Enjoy!", that a user's new words may
// end with too).
func closing(seed uint64, text string) quotePrint {
	var last [transcriptWords]uint64
	n := 0
	words(seed, text, func(w uint64) {
		last[n%transcriptWords] = w
		n++
	})
	var p quotePrint
	for i := max(0, n-transcriptWords); i < n; i++ {
		p.hash = p.hash*wordBase + last[i%transcriptWords]
		p.words++
	}
	return p
}

// printVersion starts an encoded pairPrint; printLen is its length: the
// version, each of its five prints' hash and word count, and its time in
// Unix milliseconds. A print of another version (an older process's) is
// skipped.
const (
	printVersion = 2
	printLen     = 1 + 5*9 + 8
)

// encode returns p as the shared prints keep it.
func (p pairPrint) encode() []byte {
	b := make([]byte, 1, printLen)
	b[0] = printVersion
	for _, q := range []quotePrint{p.user, p.reply, p.end, p.userEnd, p.long} {
		b = binary.BigEndian.AppendUint64(b, q.hash)
		b = append(b, byte(q.words))
	}
	return binary.BigEndian.AppendUint64(b, uint64(p.at.UnixMilli()))
}

// decodePair returns the pairPrint b encodes, false when b is not one.
func decodePair(b []byte) (pairPrint, bool) {
	if len(b) != printLen || b[0] != printVersion {
		return pairPrint{}, false
	}
	var p pairPrint
	for i, q := range []*quotePrint{&p.user, &p.reply, &p.end, &p.userEnd, &p.long} {
		at := 1 + 9*i
		q.hash, q.words = binary.BigEndian.Uint64(b[at:]), int(b[at+8])
		if most := transcriptWords + (transcriptLongWords-transcriptWords)*(i/4); q.words == 0 || q.words > most {
			return pairPrint{}, false
		}
	}
	p.at = time.UnixMilli(int64(binary.BigEndian.Uint64(b[1+5*9:])))
	return p, true
}

// remember is rememberSince of an exchange received now.
func (t *transcripts) remember(k prefixKey, turn []memory.Message, reply memory.Message) (pairPrint, bool) {
	return t.rememberSince(t.generation(), k, turn, reply)
}

// rememberSince records a captured exchange of the user k, received at
// the count of forgets gen, in this process's table: the last user
// message of its turn with text, and its reply when that has text. It
// returns the exchange's prints, for the shared ones (shareSince); an
// exchange without both is not kept (false), nor one of a user forgotten
// since gen (its exchange is erased data).
func (t *transcripts) rememberSince(gen uint64, k prefixKey, turn []memory.Message, reply memory.Message) (pairPrint, bool) {
	var said string
	for i := len(turn) - 1; i >= 0; i-- {
		if turn[i].Role == "user" && strings.TrimSpace(turn[i].Content) != "" {
			said = turn[i].Content
			break
		}
	}
	if said == "" || reply.Role != "assistant" || reply.Failed() {
		return pairPrint{}, false
	}
	seed := seedOf(k)
	p := pairPrint{user: opening(seed, said), reply: opening(seed, reply.Content), end: closing(seed, reply.Content),
		userEnd: closing(seed, said), long: longOpening(seed, reply.Content), at: t.now()}
	if p.user.words == 0 || p.reply.words == 0 || p.user.words+p.reply.words < transcriptMinWords {
		return pairPrint{}, false
	}
	t.mu.Lock()
	if t.forgotSince(k, gen) {
		t.mu.Unlock()
		return pairPrint{}, false
	}
	u, ok := t.lru.Get(k)
	if !ok {
		u = &userTurns{}
		if prev, found, _ := t.lru.PeekOrAdd(k, u); found {
			u = prev
		}
	}
	t.mu.Unlock() // a forget from here on drops u from the table
	u.mu.Lock()
	defer u.mu.Unlock()
	u.pairs = append(u.pairs, p)
	if len(u.pairs) > transcriptPairs {
		u.pairs = append(u.pairs[:0], u.pairs[len(u.pairs)-transcriptPairs:]...)
	}
	return p, true
}

// share is shareSince of an exchange received now.
func (t *transcripts) share(ctx context.Context, k prefixKey, p pairPrint) error {
	return t.shareSince(ctx, t.generation(), k, p)
}

// shareSince adds p, an exchange of the user k received at the count of
// forgets gen, to the shared prints (the transcriptPairs newest kept, for
// transcriptMaxAge), in one round trip within the timeout. Without shared
// prints it does nothing; nor for a user forgotten since gen. A forget
// that comes while the write is under way may have deleted the prints
// before it landed: the write is undone.
func (t *transcripts) shareSince(ctx context.Context, gen uint64, k prefixKey, p pairPrint) error {
	if t.shared == nil {
		return nil
	}
	forgot := func() bool {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.forgotSince(k, gen)
	}
	if forgot() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	if err := t.shared.AddPrint(ctx, k, p.encode(), transcriptPairs, transcriptMaxAge); err != nil {
		return err
	}
	if forgot() {
		return t.shared.ForgetPrints(ctx, k)
	}
	return nil
}

// forget drops the user k's prints, this process's and the shared ones
// (within forgetTimeout); an exchange of theirs received before keeps none
// (rememberSince, shareSince).
func (t *transcripts) forget(ctx context.Context, k prefixKey) error {
	t.mu.Lock()
	t.gen++
	t.forgot.Add(k, t.gen)
	t.lru.Remove(k)
	t.mu.Unlock()
	if t.shared == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, forgetTimeout)
	defer cancel()
	return t.shared.ForgetPrints(ctx, k)
}

// clear drops this process's prints of every user: erasure notices may
// have been missed. An exchange under way keeps its own: a clear comes
// each time the notices' subscription starts, the first time after a
// new process began serving, and refusing every exchange received
// before it would leave that process unable to tell its first users'
// app requests about their chats; a user's own forget still refuses
// theirs (forgotSince).
func (t *transcripts) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lru.Purge()
}

// own returns this process's prints of the user k newer than oldest.
func (t *transcripts) own(k prefixKey, oldest time.Time) []pairPrint {
	u, ok := t.lru.Get(k)
	if !ok {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	pairs := make([]pairPrint, 0, len(u.pairs))
	for _, p := range u.pairs {
		if p.at.After(oldest) {
			pairs = append(pairs, p)
		}
	}
	return pairs
}

// quotes reports whether text is a request about one of the user k's
// exchanges kept (wordSeq.quotes; resends: the user's app resends its
// history): check's answer, waited for.
func (t *transcripts) quotes(ctx context.Context, k prefixKey, text string, resends bool) (bool, error) {
	return t.check(ctx, k, text, resends).wait()
}

// check starts quotes: it checks this process's prints at once and, when
// they do not match and text has words enough to quote a pair, reads the
// shared ones in the background (one read within the timeout, ended too
// by ctx), so that the caller goes on meanwhile. The answer's err reports
// a shared read that failed or was late, the answer then being this
// process's prints' alone.
func (t *transcripts) check(ctx context.Context, k prefixKey, text string, resends bool) *quoteCheck {
	q := hashWords(seedOf(k), text)
	if q.n() < transcriptMinWords {
		return &quoteCheck{}
	}
	oldest := t.now().Add(-transcriptMaxAge)
	if q.matches(t.own(k, oldest), resends) {
		return &quoteCheck{quotes: true}
	}
	if t.shared == nil {
		return &quoteCheck{}
	}
	c := &quoteCheck{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		ctx, cancel := context.WithTimeout(ctx, t.timeout)
		defer cancel()
		raw, err := t.shared.Prints(ctx, k)
		if err != nil {
			c.err = err
			return
		}
		pairs := make([]pairPrint, 0, len(raw))
		for _, b := range raw {
			if p, ok := decodePair(b); ok && p.at.After(oldest) {
				pairs = append(pairs, p)
			}
		}
		c.quotes = q.matches(pairs, resends)
	}()
	return c
}

// quoteCheck is transcripts.check's answer, which may still be coming
// from the shared prints.
type quoteCheck struct {
	// done is closed once quotes and err are set; nil: they were at once.
	done   chan struct{}
	quotes bool
	err    error
}

// wait returns the answer, waiting for it: whether the text quotes an
// exchange kept, and the shared read's error.
func (c *quoteCheck) wait() (bool, error) {
	if c.done != nil {
		<-c.done
	}
	return c.quotes, c.err
}

// ready reports whether the answer has come: wait will not block.
func (c *quoteCheck) ready() bool {
	if c.done == nil {
		return true
	}
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wordSeq is a text's words, hashed: ws[i] is the hash of its word i,
// prefix[i] that of its first i words in order; pow[n] is wordBase to
// the n.
type wordSeq struct {
	ws, prefix []uint64
	pow        [transcriptLongWords + 1]uint64
}

// hashWords returns the words of text, seeded by seed.
func hashWords(seed uint64, text string) wordSeq {
	q := wordSeq{prefix: []uint64{0}}
	q.pow[0] = 1
	for i := 1; i < len(q.pow); i++ {
		q.pow[i] = q.pow[i-1] * wordBase
	}
	words(seed, text, func(w uint64) {
		q.ws = append(q.ws, w)
		q.prefix = append(q.prefix, q.prefix[len(q.prefix)-1]*wordBase+w)
	})
	return q
}

// n is how many words the text holds.
func (q wordSeq) n() int { return len(q.ws) }

// is reports whether p occurs at word i.
func (q wordSeq) is(p quotePrint, i int) bool {
	return i >= 0 && i+p.words < len(q.prefix) && q.prefix[i+p.words]-q.prefix[i]*q.pow[p.words] == p.hash
}

// at returns where p first occurs at or after word from, or -1.
func (q wordSeq) at(p quotePrint, from int) int {
	for i := from; i+p.words < len(q.prefix); i++ {
		if q.is(p, i) {
			return i
		}
	}
	return -1
}

// matches reports whether the text quotes one of pairs (see quotes).
func (q wordSeq) matches(pairs []pairPrint, resends bool) bool {
	for _, p := range pairs {
		if q.quotes(p, resends) {
			return true
		}
	}
	return false
}

// quotes reports whether the text is a request about the exchange p: it
// quotes, in order, the opening of the user's turn and the opening of its
// reply, and then either
//
//   - the reply's closing, ending there but for transcriptTailWords
//     words (a closing label: Open WebUI's title, tags and follow-ups,
//     LibreChat's title); or, when the user's app resends its history
//     (resends),
//   - the user's whole turn (its closing too), the reply's opening at most
//     transcriptTailWords words after it (a role label or none), and the
//     reply whole (its closing after its opening) or cut past its long
//     opening (Chatbox quotes each message's first 100 characters), in a
//     text that does not end with the word right before the reply's
//     opening. Whatever follows is the app's: its instructions after the
//     transcript (LobeChat's and Chatbox's titles), or the user's next
//     message and a closing label (Open WebUI's search and retrieval
//     queries, asked before that message is answered). A text ending with
//     the word that introduced the reply (its role label, "AI:") asks for
//     the next reply: a turn of an app pasting its history into each
//     message. A user quoting the exchange back between words of their
//     own ("I asked you …, and you answered …") puts more than
//     transcriptTailWords words between the two, and one quoting the
//     reply's first sentence quotes less than its long opening.
//
// The second form is the app's only when its user sends each chat's whole
// history with every turn (Open WebUI, LobeChat, Chatbox do): a single
// message is then a new chat's first turn at most, while a newest-only
// client sends every turn as one, and its user pasting the exchange
// and asking about it is writing a turn.
func (q wordSeq) quotes(p pairPrint, resends bool) bool {
	n := q.n()
	i := q.at(p.user, 0)
	if i < 0 {
		return false
	}
	j := q.at(p.reply, i+p.user.words)
	if j < 0 {
		return false
	}
	// The closing starts where the opening does or after it (a short
	// reply's two prints are the same words) and ends the text but for
	// transcriptTailWords words.
	if q.at(p.end, max(j, n-p.end.words-transcriptTailWords)) >= 0 {
		return true
	}
	if !resends || j == 0 || q.ws[n-1] == q.ws[j-1] {
		return false
	}
	// The user's turn ends at most transcriptTailWords words before the
	// reply opens: the last place its closing occurs before the reply.
	whole := false
	for u := q.at(p.userEnd, i); u >= 0 && u+p.userEnd.words <= j; u = q.at(p.userEnd, u+1) {
		whole = j-(u+p.userEnd.words) <= transcriptTailWords
	}
	if !whole {
		return false
	}
	return q.at(p.end, j) >= 0 || q.is(p.long, j)
}

// onlyUserMessage returns the text of a request's only message that is not
// a system or developer one when it is a user message, and false
// otherwise. A request of instructions alone (system or developer
// messages only: LibreChat sends its title request, the instructions and
// the quoted exchange, as one system message) returns its last one.
func onlyUserMessage(msgs []memory.Message) (string, bool) {
	text, n, instructions := "", 0, ""
	for _, m := range msgs {
		if memory.IsSystem(m.Role) {
			instructions = m.Content
			continue
		}
		if n++; n > 1 || m.Role != "user" {
			return "", false
		}
		text = m.Content
	}
	if n == 0 {
		return instructions, len(msgs) > 0
	}
	return text, true
}
