package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestTranscriptsTellARequestAboutTheChat: a message quoting, in order, the
// opening of the user's turn and the opening and closing of the reply of
// one of the user's newest exchanges, and ending there but for a label,
// is about the chat, whatever the app's wording and framing; one quoting
// one role, the two out of order, the reply cut short, the exchange
// followed by new words (a pasted history, the user's next message),
// another user's exchange, an exchange past transcriptMaxAge, or a pair
// too short to tell, is not.
func TestTranscriptsTellARequestAboutTheChat(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	said := "I am planning a trip to Kyoto in April.\nWhat should I pack?"
	reply := "Great choice! April is cherry blossom season.\n\nPack layers."
	jsonQuoted := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, c := range []struct {
		name string
		user string // the request's user (default ana)
		age  time.Duration
		text string
		want bool
		// resending: told only for a user seen resending their history.
		resending bool
	}{
		{name: "open webui title", text: "### Task:\nGenerate a concise, 3-5 word title.\n<chat_history>\nUSER: " + said + "\nASSISTANT: " + reply + "\n</chat_history>", want: true},
		{name: "librechat quoted and escaped", text: "Please generate a title.\n||>User:\n\"" + said + "\"\n||>Response:\n\"" + jsonQuoted(reply) + "\"\n\n||>Title:", want: true},
		{name: "escaped, the reply's trailing newline too", text: "||>User:\n" + jsonQuoted(said) + "\n||>Response:\n" + jsonQuoted(reply+"\n") + "\n\n||>Title:", want: true},
		{name: "other case and punctuation", text: "Summarise: user said «i AM planning a trip — to kyoto in april»; you answered GREAT CHOICE, april is cherry blossom season ... PACK LAYERS!", want: true},
		{name: "two words after the reply", text: "USER: " + said + "\nASSISTANT: " + reply + "\n\nShort title:", want: true},
		// Instructions after the transcript (LobeChat, Chatbox): the
		// user's whole turn, its reply right after it, then words that
		// open no new turn of the transcript.
		{name: "instructions after the reply", resending: true, text: "USER: " + said + "\nASSISTANT: " + reply + "\n\nTitle in English:", want: true},
		{name: "lobechat title", resending: true, text: "user: " + said + "\nassistant: " + reply + "\n\nPlease summarize the above conversation into a title within 5 words, without punctuation. Output language locale: en-US", want: true},
		{name: "older lobechat title, in Chinese", resending: true, text: "user: " + said + "\nassistant: " + reply + "\n\n请总结上述对话为10个字以内的标题，不需要包含标点符号，输出语言语种为：zh-CN", want: true},
		{name: "chatbox title, the reply whole", resending: true, text: chatboxTitle(said, reply), want: true},
		{name: "a custom template, reworded", resending: true, text: "Conversation:\n> " + said + "\n> " + reply + "\n\nWrite three hashtags for it, lowercase, comma separated.", want: true},
		// The boundary: with a pasted history's labels, a one-word new
		// input is three words after the reply, a turn; a bare word or two
		// after the reply, no label, is taken for a label (not stored).
		{name: "pasted history, one new word", text: "Human: " + said + "\nAI: " + reply + "\nHuman: Thanks!\nAI:", want: false},
		{name: "two bare words after the reply", text: "Human: " + said + "\nAI: " + reply + "\nthanks mate", want: true},
		{name: "pasted history, two new words", text: "Human: " + said + "\nAI: " + reply + "\nHuman: Thanks, great\nAI:", want: false},
		{name: "pasted history with the user's new input", text: "Current conversation:\nHuman: " + said + "\nAI: " + reply + "\nHuman: And what about the weather there?\nAI:", want: false},
		// Open WebUI's search and retrieval queries, asked before the
		// user's next message is answered: the transcript goes on with
		// that message, in the role the quoted turn had, and ends with a
		// label that asks for no reply.
		{name: "the user's next message after the exchange", resending: true, text: "### Task:\nGenerate search queries.\n<chat_history>\nUSER: " + said + "\nASSISTANT: " + reply + "\nUSER: My budget is two thousand euros.\n</chat_history>", want: true},
		{name: "open webui queries, an earlier exchange first", resending: true, text: owuiQueries("USER: Hello there, I need some travel advice today.\nASSISTANT: Of course! Where would you like to go?\nUSER: " + said + "\nASSISTANT: " + reply + "\nUSER: Which temples should I see first?"), want: true},
		{name: "the next message, a pasted history asking for a reply", text: "History:\nUser: " + said + "\nAssistant: " + reply + "\nUser: Which temples should I see first?\nAssistant:", want: false},
		// The limit of the rule: a history pasted with the user's new
		// message last and no reply label after it is not told from
		// Open WebUI's queries with their closing tag edited out.
		{name: "the next message, no closing label", resending: true, text: "USER: " + said + "\nASSISTANT: " + reply + "\nUSER: Which temples should I see first?", want: true},
		// Real turns that quote the exchange.
		{name: "the user's own words between the roles", text: "I asked you: " + said + "\nand you answered me: " + reply + "\nCan you summarize that in one line?", want: false},
		{name: "a pasted history whose new input has its own label", text: "Human: " + said + "\nAI: " + reply + "\n\nNew question: which temples first?\nAI:", want: false},
		{name: "the reply's first sentence quoted", text: "I wrote: " + said + "\nYou: Great choice! April is cherry blossom season.\nWhy is April better than May?", want: false},
		{name: "a title for an essay", text: "Give me a title for my essay about planning a trip to Kyoto in April and cherry blossom season.", want: false},
		{name: "the reply cut short", text: "Please generate a title.\n||>User:\n" + jsonQuoted(said) + "\n||>Response:\n" + jsonQuoted(reply[:50]+"...") + "\n\n||>Title:", want: false},
		{name: "the reply's closing before its opening", text: "USER: " + said + "\nPack layers.\nASSISTANT: Great choice! April is cherry blossom season.", want: false},
		{name: "user words only", text: "Earlier I wrote: I am planning a trip to Kyoto in April. Make it May.", want: false},
		{name: "reply only", text: "You said: Great choice! April is cherry blossom season. Are you sure?", want: false},
		{name: "reply before the user's words", text: "Great choice! April is cherry blossom season. I am planning a trip to Kyoto in April.", want: false},
		{name: "another user", user: "bob", text: "USER: " + said + "\nASSISTANT: " + reply, want: false},
		{name: "too old", age: transcriptMaxAge + time.Second, text: "USER: " + said + "\nASSISTANT: " + reply, want: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := now
			tr := newTranscripts(func() time.Time { return clock }, nil, 0)
			ana := transcriptKey("t", "ana")
			tr.remember(ana, []memory.Message{{Role: "user", Content: said}}, memory.Message{Role: "assistant", Content: reply})
			clock = now.Add(c.age)
			k := ana
			if c.user != "" {
				k = transcriptKey("t", c.user)
			}
			if got := tr.has(k, c.text); got != c.want {
				t.Errorf("quotes = %v, want %v", got, c.want)
			}
			if got, want := tr.hasNewestOnly(k, c.text), c.want && !c.resending; got != want {
				t.Errorf("of a user never seen resending: quotes = %v, want %v", got, want)
			}
		})
	}

	t.Run("a reply ending with a short line", func(t *testing.T) {
		tr := newTranscripts(func() time.Time { return now }, nil, 0)
		k := transcriptKey("t", "ana")
		enjoy := "Great choice! April is cherry blossom season.\n\nPack layers.\nEnjoy!"
		tr.remember(k, []memory.Message{{Role: "user", Content: said}}, memory.Message{Role: "assistant", Content: enjoy})
		if !tr.has(k, "<chat_history>\nUSER: "+said+"\nASSISTANT: "+enjoy+"\n</chat_history>") {
			t.Error("the transcript did not match")
		}
		if tr.has(k, "Human: "+said+"\nAI: "+enjoy+"\nHuman: I will, enjoy\nAI:") {
			t.Error("a pasted history whose new input ends with the reply's last line matched")
		}
	})
	t.Run("chatbox title, the messages cut to 100 characters", func(t *testing.T) {
		tr := newTranscripts(func() time.Time { return now }, nil, 0)
		k := transcriptKey("t", "ana")
		long := "Great choice! April is cherry blossom season, and Kyoto is at its busiest then, so book your hotel early.\n\n" +
			"Pack layers: mornings are cool and afternoons warm.\nEnjoy the trip!"
		tr.remember(k, []memory.Message{{Role: "user", Content: said}}, memory.Message{Role: "assistant", Content: long})
		if !tr.has(k, chatboxTitle(said, long)) {
			t.Error("Chatbox's title request did not match")
		}
		if tr.hasNewestOnly(k, chatboxTitle(said, long)) {
			t.Error("Chatbox's title request matched for a user never seen resending")
		}
		// A user quoting the reply's first sentence, labels and all, is
		// not an app quoting its first hundred characters.
		if tr.has(k, "Me: "+said+"\nYou: Great choice! April is cherry blossom season.\nBut is it crowded?") {
			t.Error("the reply's first sentence quoted back matched")
		}
	})
	t.Run("chinese turns", func(t *testing.T) {
		tr := newTranscripts(func() time.Time { return now }, nil, 0)
		k := transcriptKey("t", "ana")
		zhSaid, zhReply := "我四月要去京都旅行，应该带什么？", "好选择！四月是樱花季节，早晚比较凉。\n\n记得带一件外套。"
		tr.remember(k, []memory.Message{{Role: "user", Content: zhSaid}}, memory.Message{Role: "assistant", Content: zhReply})
		if !tr.has(k, "user: "+zhSaid+"\nassistant: "+zhReply+"\n\n请总结上述对话为10个字以内的标题，不需要包含标点符号，输出语言语种为：zh-CN") {
			t.Error("LobeChat's Chinese title request did not match")
		}
		for _, turn := range []string{
			"你刚才说“好选择！四月是樱花季节”，可是三月去怎么样？",
			"我问了：“" + zhSaid + "”然后你回答说：“" + zhReply + "”请帮我再简短一点。",
			"我四月要去京都旅行，应该带什么？另外预算两万日元够吗？",
		} {
			if tr.has(k, turn) {
				t.Errorf("a Chinese turn matched: %q", turn)
			}
		}
	})
	t.Run("words of a script without spaces", func(t *testing.T) {
		tr := newTranscripts(func() time.Time { return now }, nil, 0)
		k := transcriptKey("t", "ana")
		tr.remember(k, []memory.Message{{Role: "user", Content: "四月に京都へ旅行します。"}}, memory.Message{Role: "assistant", Content: "桜の季節ですね。"})
		if !tr.has(k, "### タスク:\n<chat_history>\nUSER: 四月に京都へ旅行します。\nASSISTANT: 桜の季節ですね。\n</chat_history>") {
			t.Error("a Japanese transcript did not match")
		}
		if tr.has(k, "四月に京都へ旅行します。もっと教えて。") {
			t.Error("the user's words alone matched")
		}
	})
	t.Run("a short exchange quoted back is a turn", func(t *testing.T) {
		tr := newTranscripts(func() time.Time { return now }, nil, 0)
		k := transcriptKey("t", "ana")
		tr.remember(k, []memory.Message{{Role: "user", Content: "What is the capital of France?"}}, memory.Message{Role: "assistant", Content: "Paris."})
		if tr.has(k, "What is the capital of France? Paris. And what is the capital of Spain?") {
			t.Error("a seven-word exchange quoted back matched")
		}
	})
	t.Run("a greeting and a one-word reply are not kept", func(t *testing.T) {
		tr := newTranscripts(func() time.Time { return now }, nil, 0)
		k := transcriptKey("t", "ana")
		tr.remember(k, []memory.Message{{Role: "user", Content: "hi"}}, memory.Message{Role: "assistant", Content: "Hello!"})
		if tr.has(k, "hi there, Hello! how are you") {
			t.Error("a two-word pair matched")
		}
	})
	t.Run("the newest pairs are kept", func(t *testing.T) {
		tr := newTranscripts(func() time.Time { return now }, nil, 0)
		k := transcriptKey("t", "ana")
		turn := func(i int) (string, string) {
			n := strings.Repeat("x", i+1)
			return "question number " + n + " about the trip", "answer number " + n + " about the trip"
		}
		for i := range transcriptPairs + 2 {
			u, a := turn(i)
			tr.remember(k, []memory.Message{{Role: "user", Content: u}}, memory.Message{Role: "assistant", Content: a})
		}
		for i := range transcriptPairs + 2 {
			u, a := turn(i)
			if got, want := tr.has(k, "USER: "+u+"\nASSISTANT: "+a), i >= 2; got != want {
				t.Errorf("pair %d: quotes = %v, want %v", i, got, want)
			}
		}
	})
	t.Run("a failed reply is not kept", func(t *testing.T) {
		tr := newTranscripts(func() time.Time { return now }, nil, 0)
		k := transcriptKey("t", "ana")
		failed := memory.Message{Role: "assistant", Content: reply, Raw: json.RawMessage(`{"role":"assistant","content":"x","memgate_failed":"upstream broke"}`)}
		tr.remember(k, []memory.Message{{Role: "user", Content: said}}, failed)
		if !failed.Failed() {
			t.Fatal("the reply is not marked failed")
		}
		if tr.has(k, "USER: "+said+"\nASSISTANT: "+reply) {
			t.Error("a failed reply's exchange matched")
		}
	})
}

// chatboxTitle is Chatbox's title request (src/renderer/packages/prompts.ts
// nameConversation) over one exchange: each message cut to its first 100
// characters, the instructions before and after the transcript.
func chatboxTitle(said, reply string) string {
	cut := func(s string) string { return string([]rune(s)[:min(100, len([]rune(s)))]) }
	return "Based on the chat history, give this conversation a name.\nKeep it short - 10 words max, no quotes.\nUse English.\n" +
		"Just provide the name, nothing else.\n\nHere's the conversation:\n\n```\n" + cut(said) + "\n\n---------\n\n" + cut(reply) +
		"\n```\n\nName this conversation in 10 characters or less.\nUse English.\nOnly give the name, nothing else.\n\nThe name is:"
}

// owuiQueries is Open WebUI's default query-generation request
// (DEFAULT_QUERY_GENERATION_PROMPT_TEMPLATE, cut) over a transcript.
func owuiQueries(transcript string) string {
	return "### Task:\nAnalyze the chat history to determine the necessity of generating search queries, in the given language.\n" +
		"### Output:\nStrictly return in JSON format: \n{\n  \"queries\": [\"query1\", \"query2\"]\n}\n\n" +
		"### Chat History:\n<chat_history>\n" + transcript + "\n</chat_history>\n"
}

// TestOnlyUserMessage: a request's only message, system ones aside, when it
// is a user message.
func TestOnlyUserMessage(t *testing.T) {
	m := func(role, text string) memory.Message { return memory.Message{Role: role, Content: text} }
	for _, c := range []struct {
		msgs []memory.Message
		text string
		ok   bool
	}{
		{[]memory.Message{m("user", "a")}, "a", true},
		{[]memory.Message{m("system", "s"), m("developer", "d"), m("user", "a")}, "a", true},
		{[]memory.Message{m("user", "a"), m("user", "b")}, "", false},
		{[]memory.Message{m("user", "a"), m("assistant", "b"), m("user", "c")}, "", false},
		{[]memory.Message{m("tool", "r")}, "", false},
		// Instructions alone (LibreChat's title request): the last of them.
		{[]memory.Message{m("system", "s")}, "s", true},
		{[]memory.Message{m("system", "s"), m("developer", "d")}, "d", true},
		{[]memory.Message{m("system", "s"), m("assistant", "b")}, "", false},
		{nil, "", false},
	} {
		if text, ok := onlyUserMessage(c.msgs); text != c.text || ok != c.ok {
			t.Errorf("onlyUserMessage(%v) = %q, %v; want %q, %v", c.msgs, text, ok, c.text, c.ok)
		}
	}
}

// TestRequestAboutTheChatIsNotATurn: after a user's exchange is captured, a
// request of that user whose one message quotes it (an app's title
// request) goes upstream as sent, without the Preparer, is not captured,
// and is marked X-Memory-Auxiliary: transcript and counted; the same
// request of another tenant's user of that name, or with
// Options.SkipTranscripts off, is a turn.
func TestRequestAboutTheChatIsNotATurn(t *testing.T) {
	said, reply := "My sister Alice lives in Porto since last year.", "That is lovely, Porto is a beautiful city by the river."
	title := `{"model":"gpt-4o","stream":false,"max_completion_tokens":1000,"messages":[{"role":"user","content":` +
		`"### Task:\nGenerate a concise title.\n<chat_history>\nUSER: ` + said + `\nASSISTANT: ` + reply + `\n</chat_history>"}]}`
	for _, c := range []struct {
		name   string
		skip   bool
		tenant string
		want   bool
	}{
		{name: "on", skip: true, want: true},
		{name: "another tenant", skip: true, tenant: "other", want: false},
		{name: "off", skip: false, want: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			prepared := make(chan memory.Request, 4)
			captured := make(chanCapturer, 4)
			up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: reply}))
			g := mustGateway(t, up, func(cfg *gatewayConfig) { cfg.SkipTranscripts = c.skip },
				Deps{Resolver: identity.New(nil), Preparer: injecting(prepared), Capturer: captured})
			h := map[string]string{"X-Memory-User": "ana"}
			if resp, b := g.post(t, "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"`+said+`"}]}`, h); resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			wait(t, prepared, "the turn's Prepare")
			wait(t, captured, "the turn's capture")

			if c.tenant != "" {
				h["X-Memory-Tenant"] = c.tenant
			}
			resp, b := g.post(t, "/v1/chat/completions", title, h)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if got := resp.Header.Get("X-Memory-Auxiliary") == "transcript"; got != c.want {
				t.Fatalf("X-Memory-Auxiliary %q, want it %v", resp.Header.Get("X-Memory-Auxiliary"), c.want)
			}
			if !c.want {
				wait(t, prepared, "the title request's Prepare")
				wait(t, captured, "the title request's capture")
				return
			}
			if sent := up.Requests(); !jsonEqual(t, sent[len(sent)-1].Body, []byte(title)) {
				t.Errorf("went upstream as %s", sent[len(sent)-1].Body)
			}
			if len(prepared) != 0 || len(captured) != 0 || resp.Header.Get("X-Memory-Conversation") != "" {
				t.Errorf("prepared %d, captured %d, conversation %q: want none", len(prepared), len(captured), resp.Header.Get("X-Memory-Conversation"))
			}
			g.waitMetric(t, `memgate_auxiliary_requests_total{api="chat"} 1`)
		})
	}
}

// TestPastedHistoryTurnsAreStored: an app that pastes the conversation so
// far into each new user message (a LangChain-style template: "Current
// conversation:", "Human: …", "AI: …", then the new input and "AI:")
// quotes the user's newest exchange, both roles, in order; but its
// message goes on with the user's new words after the reply, so every
// turn is a turn: prepared with memory, captured, not marked.
func TestPastedHistoryTurnsAreStored(t *testing.T) {
	inputs := []string{
		"Hi, I am planning a trip to Kyoto in April.",
		"My budget is two thousand euros for the week.",
		"Which temples should I visit first?",
		"And is it easy to get there by train?",
	}
	replies := []string{
		"Great choice! April is cherry blossom season.\n\nPack layers for the evenings.",
		"Two thousand euros is enough for a comfortable week.\nBook early.",
		"Start with Kiyomizu-dera and Fushimi Inari.\n\nGo at dawn to avoid the crowds.",
		"Yes: the JR Nara line stops at Inari station.",
	}
	var hs []http.Handler
	for _, r := range replies {
		hs = append(hs, upstreamtest.Chat(upstreamtest.Reply{Content: r}))
	}
	up := upstreamtest.New(t, upstreamtest.Sequence(hs...))
	prepared := make(chan memory.Request, len(inputs))
	captured := make(chanCapturer, len(inputs))
	g := mustGateway(t, up, func(cfg *gatewayConfig) { cfg.SkipTranscripts = true },
		Deps{Resolver: identity.New(nil), Preparer: injecting(prepared), Capturer: captured})
	h := map[string]string{"X-Memory-User": "ana"}
	history := ""
	for i, in := range inputs {
		prompt := "The following is a friendly conversation between a human and an AI.\n\nCurrent conversation:\n" +
			history + "Human: " + in + "\nAI:"
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "messages": []map[string]string{{"role": "user", "content": prompt}}})
		resp, b := g.post(t, "/v1/chat/completions", string(body), h)
		if resp.StatusCode != 200 {
			t.Fatalf("turn %d: status %d: %s", i, resp.StatusCode, b)
		}
		if got := resp.Header.Get("X-Memory-Auxiliary"); got != "" {
			t.Errorf("turn %d: X-Memory-Auxiliary %q, want none", i, got)
		}
		wait(t, prepared, "the turn's Prepare")
		ex := wait(t, captured, "the turn's capture")
		if n := len(ex.Turn); n == 0 || !strings.HasSuffix(ex.Turn[n-1].Content, in+"\nAI:") {
			t.Errorf("turn %d: captured %+v, want the prompt ending with its input", i, ex.Turn)
		}
		history += "Human: " + in + "\nAI: " + replies[i] + "\n"
	}
}

// has is quotes without shared prints, for a user seen resending their
// history.
func (t *transcripts) has(k prefixKey, text string) bool {
	ok, _ := t.quotes(context.Background(), k, text, true)
	return ok
}

// hasNewestOnly is has for a user never seen resending their history.
func (t *transcripts) hasNewestOnly(k prefixKey, text string) bool {
	ok, _ := t.quotes(context.Background(), k, text, false)
	return ok
}

// memPrints is a PrintStore in memory; err, when set, fails every call.
type memPrints struct {
	mu    sync.Mutex
	lists map[[32]byte][][]byte
	reads int
	err   error
}

func (m *memPrints) Prints(_ context.Context, user [32]byte) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.err != nil {
		return nil, m.err
	}
	return slices.Clone(m.lists[user]), nil
}

func (m *memPrints) AddPrint(_ context.Context, user [32]byte, print []byte, keep int, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	if m.lists == nil {
		m.lists = map[[32]byte][][]byte{}
	}
	l := append([][]byte{print}, m.lists[user]...)
	m.lists[user] = l[:min(len(l), keep)]
	return nil
}

func (m *memPrints) ForgetPrints(_ context.Context, user [32]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	delete(m.lists, user)
	return nil
}

// TestTranscriptsShareTheirPrints: two processes' tables over one
// PrintStore: an exchange one remembered and shared is told by the other,
// for its user only, within transcriptMaxAge; forgotten, it is gone from
// both. A request too short to quote a pair, or that its own prints
// match, reads nothing shared. A store that fails leaves the answer to
// the table's own prints, and says so.
func TestTranscriptsShareTheirPrints(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	said, reply := "I am planning a trip to Kyoto in April.", "Great choice! April is cherry blossom season.\n\nPack layers."
	title := "### Task:\nGenerate a title.\n<chat_history>\nUSER: " + said + "\nASSISTANT: " + reply + "\n</chat_history>"
	store := &memPrints{}
	a, b := newTranscripts(clock, store, time.Second), newTranscripts(clock, store, time.Second)
	ana := transcriptKey("t", "ana")
	p, ok := a.remember(ana, []memory.Message{{Role: "user", Content: said}}, memory.Message{Role: "assistant", Content: reply})
	if !ok {
		t.Fatal("the exchange was not kept")
	}
	if got, ok := decodePair(p.encode()); !ok || got.user != p.user || got.reply != p.reply || got.end != p.end ||
		got.userEnd != p.userEnd || got.long != p.long || !got.at.Equal(p.at) {
		t.Fatalf("encoded and decoded: %+v, %v; want %+v", got, ok, p)
	}
	if err := a.share(ctx, ana, p); err != nil {
		t.Fatal(err)
	}
	if got, err := b.quotes(ctx, ana, title, false); !got || err != nil {
		t.Errorf("the other process: quotes = %v, %v; want true", got, err)
	}
	after := "user: " + said + "\nassistant: " + reply + "\n\nSummarize the above conversation into a title."
	if got, err := b.quotes(ctx, ana, after, true); !got || err != nil {
		t.Errorf("the other process, instructions after the transcript: quotes = %v, %v; want true", got, err)
	}
	if got, _ := b.quotes(ctx, transcriptKey("t", "bob"), title, false); got {
		t.Error("another user's request matched the shared prints")
	}
	reads := store.reads
	if got, _ := b.quotes(ctx, ana, "Kyoto in April, cherry blossom season?", false); got || store.reads != reads {
		t.Errorf("a request too short to quote a pair: quotes %v, shared reads %d, want none", got, store.reads-reads)
	}
	if got, _ := a.quotes(ctx, ana, title, false); !got || store.reads != reads {
		t.Errorf("a request its own prints match: quotes %v, shared reads %d, want none", got, store.reads-reads)
	}
	later := newTranscripts(func() time.Time { return now.Add(transcriptMaxAge + time.Second) }, store, time.Second)
	if got, _ := later.quotes(ctx, ana, title, false); got {
		t.Error("a shared print older than transcriptMaxAge matched")
	}

	store.err = errors.New("redis down")
	if got, err := b.quotes(ctx, ana, title, false); got || err == nil {
		t.Errorf("with the store down, a process without the prints: quotes = %v, %v; want false and the error", got, err)
	}
	if got, err := a.quotes(ctx, ana, title, false); !got || err != nil {
		t.Errorf("with the store down, the process with the prints: quotes = %v, %v; want true", got, err)
	}
	store.err = nil

	if err := b.forget(ctx, ana); err != nil {
		t.Fatal(err)
	}
	a.lru.Remove(ana) // a's own, which its Forget drops (the erasure's notice)
	if got, _ := a.quotes(ctx, ana, title, false); got {
		t.Error("forgotten prints still matched")
	}
}
