// Package locomo reads the public LoCoMo long-conversation set
// (snap-research/LoCoMo, data/locomo10.json) for the memory-quality
// evaluation: ten conversations between two people over up to 35 dated
// sessions each, with questions that name their evidence turns ("D1:3",
// the third turn of session 1). The data is not part of this repository:
// the evaluation reads it from a path given on the command line.
//
// The first speaker (speaker_a) is the application's user, the second the
// assistant, whose scripted replies the evaluation's stand-in upstream
// says. Exchanges merge consecutive turns of a speaker, as a chat app
// would show them.
package locomo

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Conversation is one LoCoMo sample: two speakers, their dated sessions and
// the questions about them.
type Conversation struct {
	// ID is the sample's id ("conv-26").
	ID string
	// Speakers are speaker_a (the user) and speaker_b (the assistant).
	Speakers [2]string
	// Sessions are in order; Sessions[i].N is LoCoMo's session number.
	Sessions []Session
	// Questions are every question of the sample, all categories.
	Questions []Question
	// turns maps a dialog id ("D1:3") to its place.
	turns map[string]Ref
}

// Session is one dated sitting of a conversation.
type Session struct {
	// N is LoCoMo's session number (session_N).
	N int
	// Date is session_N_date_time, read as UTC.
	Date time.Time
	// Turns are the session's turns in order.
	Turns []Turn
}

// Turn is one dialog turn.
type Turn struct {
	// ID is LoCoMo's dialog id ("D1:3").
	ID string
	// Speaker is 0 (speaker_a, the user) or 1 (speaker_b, the assistant).
	Speaker int
	Text    string
}

// Ref locates a turn: Sessions[Session].Turns[Turn].
type Ref struct{ Session, Turn int }

// Question is one question with the turns that answer it.
type Question struct {
	Text   string
	Answer string
	// Category is LoCoMo's: 1 multi-hop, 2 temporal, 3 open-domain,
	// 4 single-hop, 5 adversarial (unanswerable).
	Category int
	// Evidence are the turns holding the answer that exist in the
	// conversation (ids naming no turn are dropped).
	Evidence []Ref
}

// CategoryName names LoCoMo's question categories.
func CategoryName(c int) string {
	switch c {
	case 1:
		return "multi-hop"
	case 2:
		return "temporal"
	case 3:
		return "open-domain"
	case 4:
		return "single-hop"
	case 5:
		return "adversarial"
	}
	return "category " + strconv.Itoa(c)
}

// Turn returns the turn at r.
func (c *Conversation) Turn(r Ref) Turn { return c.Sessions[r.Session].Turns[r.Turn] }

// Turns returns how many turns the conversation holds.
func (c *Conversation) Turns() int {
	n := 0
	for _, s := range c.Sessions {
		n += len(s.Turns)
	}
	return n
}

// dateLayout is LoCoMo's session_N_date_time ("1:56 pm on 8 May, 2023").
const dateLayout = "3:04 pm on 2 January, 2006"

// ParseDate reads a LoCoMo session date ("1:56 pm on 8 May, 2023") as UTC.
func ParseDate(s string) (time.Time, error) {
	s = strings.Join(strings.Fields(s), " ")
	// The hour may be "1:56 pm" or "01:56 PM".
	t, err := time.Parse(dateLayout, strings.ToLower(s))
	if err != nil {
		return time.Time{}, fmt.Errorf("session date %q: %w", s, err)
	}
	return t, nil
}

// evidenceID finds dialog ids in an evidence string, which may hold several
// ("D8:6; D9:17") or a stray colon ("D:11:26").
var evidenceID = regexp.MustCompile(`D:?(\d+):(\d+)`)

// sessionKey matches the conversation's session keys.
var sessionKey = regexp.MustCompile(`^session_(\d+)$`)

// Load reads a locomo10.json file.
func Load(path string) ([]Conversation, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read LoCoMo: %w", err)
	}
	return Parse(b)
}

// rawSample is one element of locomo10.json, as far as it is read.
type rawSample struct {
	SampleID     string                     `json:"sample_id"`
	Conversation map[string]json.RawMessage `json:"conversation"`
	QA           []struct {
		Question string          `json:"question"`
		Answer   json.RawMessage `json:"answer"`
		Evidence []string        `json:"evidence"`
		Category int             `json:"category"`
	} `json:"qa"`
}

// Parse reads the content of a locomo10.json file.
func Parse(b []byte) ([]Conversation, error) {
	var raw []rawSample
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("decode LoCoMo: %w", err)
	}
	out := make([]Conversation, 0, len(raw))
	for _, r := range raw {
		c, err := parseSample(r)
		if err != nil {
			return nil, fmt.Errorf("sample %s: %w", r.SampleID, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func parseSample(r rawSample) (Conversation, error) {
	c := Conversation{ID: r.SampleID, turns: map[string]Ref{}}
	str := func(key string) (string, error) {
		var s string
		if err := json.Unmarshal(r.Conversation[key], &s); err != nil {
			return "", fmt.Errorf("%s: %w", key, err)
		}
		return s, nil
	}
	var err error
	for i, k := range []string{"speaker_a", "speaker_b"} {
		if c.Speakers[i], err = str(k); err != nil {
			return c, err
		}
	}
	var nums []int
	for k := range r.Conversation {
		if m := sessionKey.FindStringSubmatch(k); m != nil {
			n, _ := strconv.Atoi(m[1]) // digits
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	for _, n := range nums {
		key := "session_" + strconv.Itoa(n)
		var turns []struct {
			Speaker string `json:"speaker"`
			DiaID   string `json:"dia_id"`
			Text    string `json:"text"`
		}
		if err := json.Unmarshal(r.Conversation[key], &turns); err != nil {
			return c, fmt.Errorf("%s: %w", key, err)
		}
		if len(turns) == 0 {
			continue
		}
		ds, err := str(key + "_date_time")
		if err != nil {
			return c, err
		}
		date, err := ParseDate(ds)
		if err != nil {
			return c, err
		}
		s := Session{N: n, Date: date}
		for _, t := range turns {
			sp := 0
			switch t.Speaker {
			case c.Speakers[0]:
			case c.Speakers[1]:
				sp = 1
			default:
				return c, fmt.Errorf("%s: speaker %q is neither %q nor %q", t.DiaID, t.Speaker, c.Speakers[0], c.Speakers[1])
			}
			c.turns[t.DiaID] = Ref{len(c.Sessions), len(s.Turns)}
			s.Turns = append(s.Turns, Turn{ID: t.DiaID, Speaker: sp, Text: t.Text})
		}
		c.Sessions = append(c.Sessions, s)
	}
	for _, q := range r.QA {
		nq := Question{Text: q.Question, Answer: answerText(q.Answer), Category: q.Category}
		seen := map[Ref]bool{}
		for _, e := range q.Evidence {
			for _, m := range evidenceID.FindAllStringSubmatch(e, -1) {
				ref, ok := c.turns["D"+m[1]+":"+m[2]]
				if ok && !seen[ref] {
					seen[ref] = true
					nq.Evidence = append(nq.Evidence, ref)
				}
			}
		}
		c.Questions = append(c.Questions, nq)
	}
	return c, nil
}

// answerText reads an answer that may be a string or a number.
func answerText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}

// Exchange is one chat request of a replay: the user's merged turns and the
// assistant's merged reply, in one session.
type Exchange struct {
	// Session is the index in Conversation.Sessions.
	Session int
	// User and Reply are the merged texts (Placeholder when a session
	// starts with the assistant or ends with the user).
	User, Reply string
}

// Placeholder stands in for the missing side of an exchange: the user's
// message before a session the assistant opens, or the reply to a session's
// last user turns. It has no words, so it is never evidence and never
// recalled.
const Placeholder = "…"

// Exchanges returns the session's exchanges: each run of user turns with
// the run of assistant turns after it, consecutive turns of a speaker
// joined by a newline.
func (c *Conversation) Exchanges(session int) []Exchange {
	var out []Exchange
	var user, reply []string
	flush := func() {
		if len(user) == 0 && len(reply) == 0 {
			return
		}
		e := Exchange{Session: session, User: Placeholder, Reply: Placeholder}
		if len(user) > 0 {
			e.User = strings.Join(user, "\n")
		}
		if len(reply) > 0 {
			e.Reply = strings.Join(reply, "\n")
		}
		out = append(out, e)
		user, reply = nil, nil
	}
	for _, t := range c.Sessions[session].Turns {
		if t.Speaker == 0 {
			if len(reply) > 0 {
				flush()
			}
			user = append(user, t.Text)
			continue
		}
		reply = append(reply, t.Text)
	}
	flush()
	return out
}
