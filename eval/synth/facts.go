package synth

// The templates of what the questions ask about. Placeholders: {S} the
// speaker the fact is about, {O} the other speaker, {V} the value, {N} a
// person's name, {C} a city, {W} a relative time ("yesterday").
//
// Every value sits in a sentence built from the everyday words the filler
// uses too (puppy, race, trip, kitchen, work), so a question's words point
// at a topic, not at one turn.

// singleTmpl is a fact stated in one turn and asked about with its words.
type singleTmpl struct {
	topic  string
	values []string
	say    string // the evidence clause, by {S}
	ask    string // the question, in the third person
	// near are lines about the same thing without the answer, said
	// elsewhere in the conversation.
	near []string
}

var singleHop = []singleTmpl{
	{"pets", []string{"Biscuit", "Pepper", "Mochi", "Waffles", "Juniper", "Pickles"}, "we finally named the new puppy {V}", "What did {S} name the new puppy?", []string{"we still can't agree on a name for the new puppy", "the new puppy needs a name that the kids can say"}},
	{"running", []string{"Riverside Half", "Harbour 10k", "Old Town Dash", "Lakeshore Classic"}, "I signed up for the {V} race in the autumn", "Which race did {S} sign up for in the autumn?", []string{"I might sign up for a race in the autumn, not sure which one", "so many races in the autumn, I can't choose"}},
	{"cooking", []string{"saffron risotto", "lamb tagine", "mushroom lasagna", "shrimp gumbo", "pumpkin curry"}, "my signature dish for dinner parties is {V}", "What is {S}'s signature dish for dinner parties?", []string{"I never know what to cook for dinner parties", "what would you say is your signature dish?"}},
	{"work", []string{"Halvorsen", "Okafor", "Brennan", "Lindqvist", "Marchetti"}, "my new boss at work is called Ms. {V}", "What is the name of {S}'s new boss at work?", []string{"my new boss at work keeps calling meetings at lunch", "I still have to learn everyone's name at work"}},
	{"family", []string{"Lucia", "Amara", "Noemi", "Ingrid", "Paloma"}, "my sister's baby girl was named {V}", "What was the name of {S}'s sister's baby girl?", []string{"my sister's baby girl is sleeping through the night now", "my sister took ages to pick a name for the baby"}},
	{"travel", []string{"Tromsø", "Cartagena", "Hoi An", "Zanzibar", "Ljubljana"}, "for the summer trip we picked {V} in the end", "Where is {S} going on the summer trip?", []string{"we still haven't picked where to go for the summer trip", "the summer trip planning is taking forever"}},
	{"garden", []string{"heirloom tomatoes", "purple basil", "sugar snap peas", "rainbow chard"}, "the thing growing best in my garden this year is the {V}", "What is growing best in {S}'s garden this year?", []string{"nothing is growing well in my garden this year", "the garden did much better last year"}},
	{"music", []string{"cello", "banjo", "clarinet", "ukulele", "trombone"}, "I started taking {V} lessons on Thursday evenings", "What lessons did {S} start taking on Thursday evenings?", []string{"Thursday evenings are my only free time", "I keep saying I'll take music lessons one day"}},
	{"books", []string{"The Salt Road", "Winter Orchard", "A Map of Rain", "The Glass Harbor"}, "our book club picked {V} for next month", "Which book did {S}'s book club pick for next month?", []string{"our book club can never pick a book for next month", "the book club picked something terrible last month"}},
	{"home", []string{"sage green", "terracotta", "navy blue", "butter yellow"}, "we painted the living room {V} over the weekend", "What colour did {S} paint the living room?", []string{"we want to paint the living room but can't pick a colour", "the paint samples are all over the living room wall"}},
	{"health", []string{"Dr. Vasquez", "Dr. Nakamura", "Dr. Adeyemi", "Dr. Fontaine"}, "the new physio for my knee is {V}", "Who is {S}'s new physio for the knee?", []string{"my knee is still not right, I need a new physio", "the physio for my knee cancelled again"}},
	{"kids", []string{"Mrs. Duarte", "Mr. Kowalski", "Ms. Achebe", "Mr. Sandoval"}, "my son's new teacher at school is {V}", "Who is the new teacher of {S}'s son at school?", []string{"my son's school changed all the teachers this year", "the new teacher sent a very long welcome email"}},
}

// paraTmpl is a fact asked about without any of its statement's content
// words (checked by the tests).
type paraTmpl struct {
	topic  string
	values []string
	say    string
	para   string
}

var paraphrased = []paraTmpl{
	{"music", []string{"cello", "viola", "oboe", "harp"}, "I've been practising the {V} for a few months now", "Which musical instrument does {S} play?"},
	{"family", []string{"pediatric nurse", "paramedic", "midwife", "pharmacist"}, "my sister just got hired as a {V}", "What is the profession of {S}'s sibling?"},
	{"pets", []string{"greyhound", "beagle", "dachshund", "border collie"}, "we adopted a rescue {V} last spring", "What breed of animal lives with {S}?"},
	{"home", []string{"fishing village", "mountain town", "farming valley", "river port"}, "I grew up in a tiny {V} up north", "Where was {S} raised as a child?"},
	{"health", []string{"shellfish", "sesame", "walnuts", "kiwi"}, "I'm allergic to {V}, so no dishes with it please", "Which food must {S} avoid?"},
	{"work", []string{"fire station", "harbour office", "night bakery", "tram depot"}, "my husband works night shifts at the {V}", "Where is {S}'s spouse employed?"},
	{"travel", []string{"Fiat", "Volvo", "Skoda", "Mazda"}, "I drive a little red {V} to the office", "What vehicle does {S} own?"},
	{"kids", []string{"seven", "nine", "eleven", "five"}, "our son turned {V} in March", "How old is {S}'s boy?"},
	{"books", []string{"mystery novels", "space operas", "old westerns", "graphic memoirs"}, "at night I read {V} until I fall asleep", "What genre does {S} enjoy before bed?"},
	{"cooking", []string{"mint tea", "oolong", "chai", "rooibos"}, "honestly {V} is my thing, never coffee", "Which hot beverage does {S} drink?"},
	{"running", []string{"Saturday", "Sunday", "Wednesday", "Friday"}, "I volunteer at the animal shelter every {V} morning", "On what weekday does {S} help out with abandoned dogs and cats?"},
	{"garden", []string{"chemistry", "geography", "biology", "algebra"}, "I teach {V} at the high school", "Which subject does {S} give classes in?"},
}

// adjacentTmpl is a fact that comes out as the answer to the other
// speaker's question: the question turn holds the topic's words, the
// answer turn only the value.
type adjacentTmpl struct {
	topic  string
	values []string
	prompt string // by {O}: asks {S}
	reply  string // by {S}: answers with {V}, none of the probe's words
	ask    string // the probe, in the third person
}

var adjacent = []adjacentTmpl{
	{"travel", []string{"Casa Azul", "the Albatross", "Villa Serena", "the Lighthouse Inn"}, "{S}, which hotel did you end up booking for the trip?", "{V}, right by the old harbour, can't wait", "Which hotel did {S} book for the trip?"},
	{"pets", []string{"Ziggy", "Nutmeg", "Olive", "Bruno"}, "{S}, so what did you call the kitten in the end?", "{V}! The kids voted for it", "What did {S} call the kitten?"},
	{"cooking", []string{"lemon drizzle", "carrot walnut", "black forest", "pistachio"}, "{S}, what cake are you baking for the party?", "{V}, same as last year, everyone asked for it again", "What cake is {S} baking for the party?"},
	{"music", []string{"The Lumineers", "Fleet Foxes", "Khruangbin", "Arcade Fire"}, "{S}, who played at the festival you went to?", "{V} headlined and honestly it was magical", "Who played at the festival {S} went to?"},
	{"home", []string{"Greenhill", "Riverside", "Oak Park", "Northgate"}, "{S}, which neighbourhood are you moving to?", "{V}, near the market, much quieter", "Which neighbourhood is {S} moving to?"},
	{"work", []string{"Tuesdays and Thursdays", "Mondays and Fridays", "Wednesdays only", "every other Friday"}, "{S}, which days do you work from home now?", "{V}, it's been great for me", "Which days does {S} work from home?"},
	{"family", []string{"a silk scarf", "a pottery course", "a pair of binoculars", "a spa voucher"}, "{S}, what did you get your mom for her birthday?", "{V}, she loved it", "What did {S} get their mom for her birthday?"},
	{"running", []string{"two hours and five minutes", "one hour fifty", "two hours twenty", "one hour forty-two"}, "{S}, what was your time in the half marathon?", "{V}! A personal best", "What was {S}'s time in the half marathon?"},
	{"garden", []string{"lavender", "rosemary", "hydrangeas", "sunflowers"}, "{S}, what are you planting along the fence?", "{V}, lots of it, the bees will be happy", "What is {S} planting along the fence?"},
	{"books", []string{"Ishiguro", "Le Guin", "Saramago", "Morrison"}, "{S}, who is your favourite author these days?", "{V}, hands down, I've read everything twice", "Who is {S}'s favourite author?"},
	{"health", []string{"sprained ligament", "stress fracture", "pulled hamstring", "torn meniscus"}, "{S}, what did the doctor say about your leg?", "a {V}, six weeks of rest apparently", "What did the doctor say about {S}'s leg?"},
	{"kids", []string{"karate", "swimming club", "chess club", "ballet"}, "{S}, what after-school activity did your daughter choose?", "{V}, she's obsessed already", "What after-school activity did {S}'s daughter choose?"},
}

// temporalTmpl is an event stated relative to the session's date; the
// question asks when it happened.
type temporalTmpl struct {
	topic string
	say   string // contains {W}
	ask   string
	near  []string
}

var temporal = []temporalTmpl{
	{"running", "I ran my first 10k race {W}", "When did {S} run their first 10k race?", []string{"I'm nervous about running my first 10k race", "do you remember your first race?"}},
	{"pets", "we adopted a cat from the shelter {W}", "When did {S} adopt a cat from the shelter?", []string{"we keep visiting the shelter and looking at the cats", "the shelter has so many cats right now"}},
	{"music", "I went to my first pottery class {W} and loved it", "When did {S} go to their first pottery class?", []string{"I've been thinking about a pottery class", "the pottery class near me is always full"}},
	{"work", "I got promoted at work {W}", "When did {S} get promoted at work?", []string{"everyone at work is talking about promotions", "I don't think I'll get promoted this year"}},
	{"home", "we signed the lease for the new apartment {W}", "When did {S} sign the lease for the new apartment?", []string{"the lease for the new apartment is twenty pages long", "we still haven't found a new apartment"}},
	{"family", "I visited my grandmother in the hospital {W}", "When did {S} visit their grandmother in the hospital?", []string{"my grandmother hates the hospital food", "I should visit my grandmother more often"}},
	{"travel", "I passed my driving test {W}", "When did {S} pass their driving test?", []string{"my driving test is coming up and I'm terrified", "I failed my first driving test years ago"}},
	{"garden", "I planted the tomatoes in the garden {W}", "When did {S} plant the tomatoes in the garden?", []string{"it's still too cold to plant the tomatoes", "where in the garden should the tomatoes go?"}},
	{"kids", "I took the kids to the aquarium {W}", "When did {S} take the kids to the aquarium?", []string{"the kids keep asking to go to the aquarium", "the aquarium is so expensive for a family"}},
	{"books", "I finished reading that huge novel {W}", "When did {S} finish reading the huge novel?", []string{"that huge novel is taking me forever to read", "I started reading a huge novel, wish me luck"}},
	{"cooking", "I baked bread from scratch for the first time {W}", "When did {S} bake bread from scratch for the first time?", []string{"I want to try baking bread from scratch", "bread from scratch seems so hard"}},
	{"health", "I had my job interview at the bank {W}", "When did {S} have a job interview at the bank?", []string{"I have a job interview at the bank soon", "the bank never called me back about the job"}},
}

// relative times and their offsets in days from the session's date.
var relatives = []struct {
	text string
	days int
}{{"yesterday", -1}, {"this morning", 0}, {"today", 0}, {"last night", -1}, {"two days ago", -2}, {"three days ago", -3}}

// Multi-hop: a person is introduced with a hook in one session and a
// detail about them, named only, in a later one; the question names the
// hook and asks for the detail.
var (
	relations = []string{"cousin", "neighbour", "old roommate", "coworker", "college friend", "brother-in-law"}
	hopNames  = []string{"Rafa", "Dmitri", "Selin", "Kofi", "Anouk", "Mateus", "Priya", "Tobias", "Lena", "Yusuf"}
	hopCities = []string{"Denver", "Bergen", "Valparaíso", "Osaka", "Tbilisi", "Halifax", "Porto", "Adelaide", "Kraków", "Nairobi"}
	hooks     = []struct{ say, ask string }{
		{"my {R} {N} just moved to {C}, so I finally have a place to stay there", "the {R} of {S} who moved to {C}"},
		{"my {R} {N} is getting married in {C} next spring", "the {R} of {S} who is getting married in {C}"},
		{"my {R} {N} spent the whole summer in {C}", "the {R} of {S} who spent the summer in {C}"},
	}
	details = []struct {
		values   []string
		say, ask string
	}{
		{[]string{"a sushi chef", "a paramedic", "a park ranger", "a sound engineer", "a tax lawyer"}, "{N} called me, they finally got a job as {V}", "What job did {Q} get?"},
		{[]string{"a parrot", "a tortoise", "two ferrets", "a corgi", "an iguana"}, "guess what {N} brought home, {V}", "What pet did {Q} bring home?"},
		{[]string{"the accordion", "the harp", "the bagpipes", "the drums", "the sitar"}, "{N} has started learning {V}, of all things", "What instrument did {Q} start learning?"},
		{[]string{"a food truck", "a bike shop", "a yoga studio", "a bookshop", "a tiny bakery"}, "{N} quit and opened {V} downtown", "What business did {Q} open?"},
	}
)
