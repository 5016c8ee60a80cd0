package main

import (
	"fmt"
	"time"
)

// session is one scripted conversation.
type session struct {
	when  string // "Monday 2 March", of scriptYear
	turns []string
}

// scriptYear is the year of the script's sessions.
const scriptYear = 2026

// day returns when the session starts: its day, at 19:00 UTC.
func (s session) day() (time.Time, error) {
	t, err := time.Parse("Monday 2 January 2006 15:04", fmt.Sprintf("%s %d 19:00", s.when, scriptYear))
	if err != nil {
		return time.Time{}, fmt.Errorf("session date %q: %w", s.when, err)
	}
	return t, nil
}

// demoUser is the user the script speaks for.
const demoUser = "marta"

// script is the demo conversation: facts stated in the first sessions, a
// fact that changes, and questions in the last session that need them.
var script = []session{
	{when: "Monday 2 March", turns: []string{
		"Hi! I'm Marta. I live in Lisbon and I'm vegetarian.",
		"I want to save R$ 5.000 by June for a trip to Japan.",
		"Can you suggest a quick dinner idea for tonight?",
		"Thanks! Any tips to stay motivated while saving?",
	}},
	{when: "Friday 8 May", turns: []string{
		"Big news: I moved to Porto last month!",
		"My sister Ana is visiting on 12 June, any ideas for a day out?",
		"Tell me something fun about octopuses.",
		"What could we do on a rainy afternoon here?",
	}},
	{when: "Wednesday 10 June", turns: []string{
		"Can you recommend a restaurant for dinner with my sister?",
		"How much did I want to save, and for what?",
	}},
}
