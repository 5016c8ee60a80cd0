package synth

import "strings"

// Filler: what two friends say between the things worth remembering. Topic
// lines reuse the words the questions ask with (puppy, race, trip, boss,
// garden, lessons, book club, doctor), so a question's words match dozens
// of turns; chit-chat lines ("Thanks!", "Cool! What did it look like?")
// match nothing in particular and everything by the names. {O} is the
// person addressed, {T} a topic word of the session.

var topicFiller = map[string][]string{
	"pets": {
		"the new puppy chewed through another shoe this morning",
		"we took the dog to the park and she refused to come back",
		"the vet says the puppy is growing fast, which explains the appetite",
		"do you think a second cat would be too much for our place?",
		"I can't decide on a name for anything, remember when we argued about the puppy's name?",
		"the shelter is always looking for people to walk the dogs",
		"the kitten sleeps on my keyboard whenever I try to work",
		"how's your dog doing with the new food?",
	},
	"running": {
		"my legs are still sore from the long run on Sunday",
		"I think I need new running shoes, these are falling apart",
		"the race route goes right past the river, it's beautiful",
		"did you ever sign up for that race you mentioned?",
		"training for a half marathon takes over your whole week",
		"I ran in the rain today and honestly loved it",
		"what time do you usually go out for a run?",
		"my knee complains after anything longer than ten kilometres",
	},
	"cooking": {
		"I tried a new recipe for dinner and it was a disaster",
		"we're hosting a dinner party on Saturday, any ideas for dessert?",
		"the kitchen still smells like burnt garlic",
		"I bought way too many vegetables at the market again",
		"what's the best cake you've ever baked?",
		"I've been cooking a lot more since the winter started",
		"can you send me that soup recipe again?",
		"the oven at the new place runs really hot",
	},
	"work": {
		"work has been intense, the project deadline moved up again",
		"my boss scheduled three meetings back to back today",
		"the new office is nice but the commute is long",
		"I'm thinking about asking for a raise at work",
		"a coworker brought cake to the office for no reason, best day",
		"I worked late again, the client changed everything",
		"do you ever work from home on Fridays?",
		"the team lunch was actually fun this time",
	},
	"family": {
		"my sister called and we talked for two hours",
		"my mom wants everyone home for her birthday this year",
		"the baby pictures from my cousin are adorable",
		"family dinners get louder every year",
		"my brother finally fixed the leaky tap at my parents' place",
		"my grandmother keeps asking when I'll visit",
		"how's your family doing?",
		"we're planning a big family trip but nobody agrees on where",
	},
	"travel": {
		"I keep looking at flights for the summer trip",
		"the hotel prices for the trip are wild right now",
		"do you prefer the beach or the mountains for a trip?",
		"I found my old passport, it expired years ago",
		"the train is so much nicer than flying for short trips",
		"we should plan a weekend trip together sometime",
		"I packed way too much for the last trip",
		"the airport was chaos on the way back",
	},
	"garden": {
		"the garden is finally coming back to life",
		"something keeps eating the lettuce in my garden",
		"I spent the whole afternoon weeding the garden",
		"the tomatoes need more sun than the garden gets",
		"do you water your plants in the morning or at night?",
		"my neighbour gave me cuttings for the garden",
		"I want to build a little fence around the vegetable beds",
		"the garden centre had a sale on seeds",
	},
	"music": {
		"I've been listening to the same album all week",
		"my music lessons are the highlight of my week",
		"the concert tickets sold out in five minutes",
		"practising every evening is harder than I thought",
		"the festival lineup this year looks amazing",
		"do you still play anything, music-wise?",
		"my neighbour practises the piano at midnight",
		"we sang terribly at karaoke last night",
	},
	"books": {
		"our book club spent more time eating than talking about the book",
		"I can't put this book down, I read until two in the morning",
		"the library has a great new reading corner",
		"who picks the book for your book club next month?",
		"I keep buying books faster than I read them",
		"that novel had the worst ending ever",
		"I'm reading three books at once, bad idea",
		"do you like audiobooks or real books?",
	},
	"home": {
		"we're still unpacking boxes at the new apartment",
		"painting the living room took the whole weekend",
		"the neighbours upstairs are moving furniture at night again",
		"I finally hung the pictures in the hallway",
		"our landlord says the heating will be fixed next week",
		"I love the light in the living room in the afternoon",
		"we're thinking about moving to a quieter neighbourhood",
		"the apartment search is exhausting",
	},
	"health": {
		"I have a doctor's appointment about my knee next week",
		"physio exercises are boring but they work",
		"I've been sleeping so much better lately",
		"my leg still hurts when I take the stairs",
		"the doctor told me to drink more water, classic",
		"I'm trying to walk more during the day",
		"that cold knocked me out for three days",
		"do you take any vitamins in the winter?",
	},
	"kids": {
		"the kids have a school play next week",
		"my son's teacher sent home another note about homework",
		"my daughter wants to try every after-school activity",
		"school mornings are pure chaos at our place",
		"the kids built a fort in the living room",
		"parent-teacher meetings always run late",
		"my son lost another water bottle at school",
		"how do you get your kids to eat vegetables?",
	},
}

// Topics lists the topics in a fixed order (map order is random).
var topics = []string{"pets", "running", "cooking", "work", "family", "travel", "garden", "music", "books", "home", "health", "kids"}

var (
	chitChat = []string{
		"Thanks!", "Haha, fair enough.", "Bye! Talk soon.", "Cool! What did it look like?", "That sounds fun!",
		"Oh no, really?", "Same here honestly.", "Good morning!", "I know, right?", "Ha! Classic.",
		"How was your day?", "Not much, just a quiet day at home.", "That's so nice to hear.", "Wow, good for you!",
		"Let me know how it goes.", "Anyway, how are things with you?", "I really like that idea.", "Sounds like a plan.",
		"Hope you have a great weekend!", "Really? Tell me more.", "I'm so tired today.", "That made me laugh.",
		"Take care of yourself.", "I totally get that.", "We should catch up properly soon.", "Yes! Exactly.",
		"Hmm, I'm not sure about that.", "Okay, talk later!", "Miss you, by the way.", "That's a lot, take it easy.",
	}
	reactions = []string{
		"that sounds amazing", "oh that's rough", "haha I love that", "wow, how did that go?", "no way, really?",
		"that's so you", "honestly same", "you always have the best stories", "I'd be so stressed", "that's great news",
	}
	// openers and closers address the other speaker by name.
	openers = []string{"Hey {O}, ", "{O}! ", "Hi {O}, ", "Oh {O}, ", "Haha {O}, ", "You know what, {O}, ", "Morning {O}! ", "{O}, "}
	closers = []string{", {O}.", ", {O}!", ", {O}, seriously.", ", you know, {O}?"}
)

// capitalise upper-cases the first letter of s.
func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
