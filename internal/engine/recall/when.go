package recall

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// A query's time words steer recall toward the passages said when the
// query points at, relative to the request's time: "yesterday", "last
// week", "in May", "in 2023", "three weeks ago", "last year" (and their
// Portuguese forms: "ontem", "semana passada", "em maio", "há três
// semanas", "ano passado"). Those said in that window, or soon after it
// (people tell of an event later: "I went camping last week"), score
// inWindowBoost times as much; the others keep their score, so a wrong
// reading of the words never hides a passage. A query about recent events
// ("recently", "lately", "these days", "ultimamente") gives newer passages
// a mild edge (recentWeight). Without such words, age does not change a
// passage's score: an old relevant passage competes on relevance alone,
// and the newer one wins only a tie.
const (
	// inWindowBoost multiplies the score of a passage said in the window.
	inWindowBoost = 2.0
	// recentHalfLife and recentFloor shape recentWeight: the score of a
	// passage halves per recentHalfLife of age down to recentFloor of
	// itself, so a relevant old passage still outranks an unrelated new one.
	recentHalfLife = 30 * 24 * time.Hour
	recentFloor    = 0.5
	// Slack after a window: a passage said up to this much after the
	// window's end still counts (clamped to the window's own length).
	minSlack = 7 * 24 * time.Hour
	maxSlack = 45 * 24 * time.Hour
)

// timeScope is what a query says about when its answer was said.
type timeScope struct {
	// from and to bound the window the query names (to exclusive); zero
	// when it names none.
	from, to time.Time
	// recent is true when the query asks about recent events.
	recent bool
}

// weight is the factor a passage said at said is scored by under s.
func (s timeScope) weight(said, now time.Time) float64 {
	w := 1.0
	if !s.from.IsZero() {
		slack := min(max(s.to.Sub(s.from), minSlack), maxSlack)
		if !said.Before(s.from) && said.Before(s.to.Add(slack)) {
			w *= inWindowBoost
		}
	}
	if s.recent {
		w *= recentWeight(now.Sub(said))
	}
	return w
}

// recentWeight is recentFloor + (1-recentFloor)·0.5^(age/recentHalfLife).
func recentWeight(age time.Duration) float64 {
	if age <= 0 {
		return 1
	}
	return recentFloor + (1-recentFloor)*math.Pow(0.5, float64(age)/float64(recentHalfLife))
}

// months are the month names a query may use, English and Portuguese,
// with common abbreviations (never ones that are also everyday words:
// "may" counts only after "in", "em", "last" or before a year).
var months = map[string]time.Month{
	"january": 1, "jan": 1, "janeiro": 1,
	"february": 2, "feb": 2, "fevereiro": 2, "fev": 2,
	"march": 3, "mar": 3, "março": 3, "marco": 3,
	"april": 4, "apr": 4, "abril": 4, "abr": 4,
	"may": 5, "maio": 5,
	"june": 6, "jun": 6, "junho": 6,
	"july": 7, "jul": 7, "julho": 7,
	"august": 8, "aug": 8, "agosto": 8, "ago": 8,
	"september": 9, "sep": 9, "sept": 9, "setembro": 9, "set": 9,
	"october": 10, "oct": 10, "outubro": 10, "out": 10,
	"november": 11, "nov": 11, "novembro": 11,
	"december": 12, "dec": 12, "dezembro": 12, "dez": 12,
}

// ambiguousMonths are month words that are everyday words too; they name a
// month only after a preposition or before a year.
var ambiguousMonths = map[string]bool{"may": true, "mar": true, "jan": true, "set": true, "out": true, "ago": true, "dez": true, "jun": true, "jul": true}

// recentWords mark a query about recent events.
var recentWords = map[string]bool{
	"recently": true, "lately": true, "recent": true, "latest": true, "nowadays": true, "currently": true,
	"recentemente": true, "ultimamente": true, "atualmente": true, "recente": true, "recentes": true,
}

// numberWords read small spelled numbers ("three weeks ago", "há duas
// semanas").
var numberWords = map[string]int{
	"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
	"couple": 2, "few": 3,
	"um": 1, "uma": 1, "dois": 2, "duas": 2, "três": 3, "tres": 3, "quatro": 4, "cinco": 5, "seis": 6, "sete": 7, "oito": 8, "nove": 9, "dez": 10,
}

// units are the spans "N units ago" counts in.
var units = map[string]string{
	"day": "day", "days": "day", "dia": "day", "dias": "day",
	"week": "week", "weeks": "week", "semana": "week", "semanas": "week",
	"month": "month", "months": "month", "mês": "month", "mes": "month", "meses": "month",
	"year": "year", "years": "year", "ano": "year", "anos": "year",
	"weekend": "weekend", "fim": "weekend",
}

// whenWords splits a query into lower-case words of letters and digits.
func whenWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// parseWhen reads the time words of a query asked at now (see the
// comment above inWindowBoost). The first window named wins.
func parseWhen(text string, now time.Time) timeScope {
	ws := whenWords(text)
	var s timeScope
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	set := func(from, to time.Time) {
		if s.from.IsZero() {
			s.from, s.to = from, to
		}
	}
	at := func(i int) string {
		if i < 0 || i >= len(ws) {
			return ""
		}
		return ws[i]
	}
	year := func(w string) (int, bool) {
		if len(w) != 4 {
			return 0, false
		}
		y, err := strconv.Atoi(w)
		return y, err == nil && y >= 1900 && y <= 2200
	}
	// lastMonth is the newest month m that began on or before now.
	lastMonth := func(m time.Month) time.Time {
		t := time.Date(now.Year(), m, 1, 0, 0, 0, 0, now.Location())
		if t.After(now) {
			t = t.AddDate(-1, 0, 0)
		}
		return t
	}
	for i, w := range ws {
		prev, next := at(i-1), at(i+1)
		if recentWords[w] {
			s.recent = true
		}
		switch {
		case w == "yesterday" || w == "ontem":
			set(day.AddDate(0, 0, -1), day)
		case w == "today" || w == "hoje" && next != "em": // "hoje em dia" is "nowadays"
			set(day, day.AddDate(0, 0, 1))
		case w == "tonight" || w == "tomorrow":
			set(day, day.AddDate(0, 0, 1))
		case w == "hoje" && next == "em":
			s.recent = true
		case (w == "these" || w == "esses" || w == "estes") && next == "days" || w == "dias" && (prev == "esses" || prev == "estes"):
			s.recent = true
		case w == "last" || w == "past" || w == "passado" || w == "passada":
			// "last week", "last May", "semana passada", "mês passado".
			unit := next
			if w == "passado" || w == "passada" {
				unit = prev
			}
			if n := count(next); n > 0 && w != "passado" && w != "passada" && units[at(i+2)] != "" {
				// "the last two weeks", "past 3 months": up to now.
				switch units[at(i+2)] {
				case "day":
					set(day.AddDate(0, 0, -n), day.AddDate(0, 0, 1))
				case "week", "weekend":
					set(day.AddDate(0, 0, -7*n), day.AddDate(0, 0, 1))
				case "month":
					set(day.AddDate(0, -n, 0), day.AddDate(0, 0, 1))
				case "year":
					set(day.AddDate(-n, 0, 0), day.AddDate(0, 0, 1))
				}
				continue
			}
			if m, ok := months[unit]; ok {
				from := lastMonth(m)
				if from.Month() == now.Month() && from.Year() == now.Year() {
					from = from.AddDate(-1, 0, 0)
				}
				set(from, from.AddDate(0, 1, 0))
				continue
			}
			switch units[unit] {
			case "day":
				set(day.AddDate(0, 0, -1), day)
			case "week":
				set(day.AddDate(0, 0, -14), day)
			case "weekend":
				set(day.AddDate(0, 0, -9), day)
			case "month":
				first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, now.Location())
				set(first.AddDate(0, -1, 0), first)
			case "year":
				set(time.Date(now.Year()-1, 1, 1, 0, 0, 0, 0, now.Location()), time.Date(now.Year(), 1, 1, 0, 0, 0, 0, now.Location()))
			}
			if next == "night" {
				set(day.AddDate(0, 0, -1), day)
			}
		case w == "this" || w == "esta" || w == "este" || w == "neste" || w == "nesta":
			switch units[next] {
			case "week":
				set(day.AddDate(0, 0, -7), day.AddDate(0, 0, 1))
			case "month":
				set(time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, now.Location()), day.AddDate(0, 0, 1))
			case "year":
				set(time.Date(now.Year(), 1, 1, 0, 0, 0, 0, now.Location()), day.AddDate(0, 0, 1))
			}
		case w == "ago" || w == "atrás" || w == "atras" || w == "há" || w == "ha":
			// "three weeks ago", "3 dias atrás", "há duas semanas".
			n, unit := 0, ""
			if w == "há" || w == "ha" {
				n, unit = count(next), units[at(i+2)]
			} else {
				n, unit = count(at(i-2)), units[prev]
			}
			if n <= 0 || unit == "" {
				continue
			}
			switch unit {
			case "day":
				t := day.AddDate(0, 0, -n)
				set(t.AddDate(0, 0, -1), t.AddDate(0, 0, 2))
			case "week", "weekend":
				t := day.AddDate(0, 0, -7*n)
				set(t.AddDate(0, 0, -4), t.AddDate(0, 0, 5))
			case "month":
				t := day.AddDate(0, -n, 0)
				set(t.AddDate(0, 0, -15), t.AddDate(0, 0, 16))
			case "year":
				t := day.AddDate(-n, 0, 0)
				set(t.AddDate(0, -6, 0), t.AddDate(0, 6, 0))
			}
		default:
			if y, ok := year(w); ok {
				if m, ok := months[prev]; ok { // "May 2023"
					from := time.Date(y, m, 1, 0, 0, 0, 0, now.Location())
					set(from, from.AddDate(0, 1, 0))
				} else if m, ok := months[at(i-2)]; ok && prev == "de" { // "maio de 2023"
					from := time.Date(y, m, 1, 0, 0, 0, 0, now.Location())
					set(from, from.AddDate(0, 1, 0))
				} else if _, ok := months[next]; !ok {
					set(time.Date(y, 1, 1, 0, 0, 0, 0, now.Location()), time.Date(y+1, 1, 1, 0, 0, 0, 0, now.Location()))
				}
				continue
			}
			m, ok := months[w]
			if !ok {
				continue
			}
			if _, ok := year(next); ok {
				continue // read at the year
			}
			if next == "de" {
				if _, ok := year(at(i + 2)); ok {
					continue
				}
			}
			if ambiguousMonths[w] && prev != "in" && prev != "em" && prev != "during" && prev != "since" && prev != "early" && prev != "late" {
				continue
			}
			from := lastMonth(m)
			set(from, from.AddDate(0, 1, 0))
		}
	}
	return s
}

// count reads a count word: digits or a small spelled number (0: none).
func count(w string) int {
	if n, err := strconv.Atoi(w); err == nil && n > 0 && n < 1000 {
		return n
	}
	return numberWords[w]
}
