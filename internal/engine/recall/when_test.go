package recall

import (
	"testing"
	"time"
)

func TestParseWhen(t *testing.T) {
	now := time.Date(2023, time.July, 15, 14, 30, 0, 0, time.UTC)
	d := func(y int, m time.Month, day int) time.Time { return time.Date(y, m, day, 0, 0, 0, 0, time.UTC) }
	tests := []struct {
		query    string
		from, to time.Time
		recent   bool
	}{
		{query: "What did Melanie paint?"},
		{query: "When did Caroline go to the support group?"},
		{query: "What did I eat yesterday?", from: d(2023, 7, 14), to: d(2023, 7, 15)},
		{query: "o que eu comi ontem?", from: d(2023, 7, 14), to: d(2023, 7, 15)},
		{query: "what did we decide last week", from: d(2023, 7, 1), to: d(2023, 7, 15)},
		{query: "o que decidimos na semana passada", from: d(2023, 7, 1), to: d(2023, 7, 15)},
		{query: "Where did I travel last month?", from: d(2023, 6, 1), to: d(2023, 7, 1)},
		{query: "o que comprei no mês passado", from: d(2023, 6, 1), to: d(2023, 7, 1)},
		{query: "What did she start last year?", from: d(2022, 1, 1), to: d(2023, 1, 1)},
		{query: "qual curso ela começou no ano passado?", from: d(2022, 1, 1), to: d(2023, 1, 1)},
		{query: "When did Melanie go camping in June?", from: d(2023, 6, 1), to: d(2023, 7, 1)},
		{query: "o que aconteceu em maio?", from: d(2023, 5, 1), to: d(2023, 6, 1)},
		// A month after now in this year is last year's.
		{query: "what happened in December?", from: d(2022, 12, 1), to: d(2023, 1, 1)},
		{query: "What setback did she face in October 2022?", from: d(2022, 10, 1), to: d(2022, 11, 1)},
		{query: "a reunião de março de 2023", from: d(2023, 3, 1), to: d(2023, 4, 1)},
		{query: "How many times did she go to the beach in 2022?", from: d(2022, 1, 1), to: d(2023, 1, 1)},
		{query: "what did I say three weeks ago", from: d(2023, 6, 20), to: d(2023, 6, 29)},
		{query: "o que eu disse há duas semanas", from: d(2023, 6, 27), to: d(2023, 7, 6)},
		{query: "what did I buy 2 days ago", from: d(2023, 7, 12), to: d(2023, 7, 15)},
		{query: "what have I read over the past two weeks", from: d(2023, 7, 1), to: d(2023, 7, 16)},
		{query: "What did Melanie paint recently?", recent: true},
		{query: "o que ela tem feito ultimamente?", recent: true},
		{query: "what are you into these days", recent: true},
		// "may" as a verb, "set" and "out" as words: no month.
		{query: "May I ask what you set out to do?"},
		{query: "you may want to check it"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			got := parseWhen(tt.query, now)
			if !got.from.Equal(tt.from) || !got.to.Equal(tt.to) || got.recent != tt.recent {
				t.Fatalf("parseWhen = [%v, %v) recent %v, want [%v, %v) recent %v", got.from, got.to, got.recent, tt.from, tt.to, tt.recent)
			}
		})
	}
}

func TestTimeScopeWeight(t *testing.T) {
	now := time.Date(2023, time.July, 15, 14, 30, 0, 0, time.UTC)
	june := parseWhen("When did Melanie go camping in June?", now)
	for _, tt := range []struct {
		name string
		said time.Time
		want float64
	}{
		{"in the month", time.Date(2023, 6, 20, 9, 0, 0, 0, time.UTC), inWindowBoost},
		{"told soon after", time.Date(2023, 7, 3, 9, 0, 0, 0, time.UTC), inWindowBoost},
		{"before", time.Date(2023, 5, 30, 9, 0, 0, 0, time.UTC), 1},
		{"a year earlier", time.Date(2022, 6, 20, 9, 0, 0, 0, time.UTC), 1},
		{"long after", time.Date(2023, 9, 1, 9, 0, 0, 0, time.UTC), 1},
	} {
		if got := june.weight(tt.said, now); got != tt.want {
			t.Errorf("%s: weight %v, want %v", tt.name, got, tt.want)
		}
	}
	recent := parseWhen("what did she paint recently", now)
	fresh := recent.weight(now.Add(-24*time.Hour), now)
	old := recent.weight(now.AddDate(-2, 0, 0), now)
	if !(fresh > old && old >= recentFloor && fresh <= 1) {
		t.Errorf("recent weights: a day old %v, two years old %v; want newer higher, both in [%v, 1]", fresh, old, recentFloor)
	}
	none := parseWhen("what did she paint", now)
	if w := none.weight(now.AddDate(-3, 0, 0), now); w != 1 {
		t.Errorf("no time words: weight %v for an old passage, want 1", w)
	}
}
