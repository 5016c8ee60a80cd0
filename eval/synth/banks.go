package synth

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// planted is one drawn item: what the user says, what is asked later, and
// the value that answers it. Changed facts also carry the old statement and
// value; the new statement never repeats the old value.
type planted struct {
	statement, question, value string
	// indirect asks for the same value without the statement's words, as
	// a user relying on the assistant to remember would.
	indirect          string
	oldStatement, old string
}

// gen draws values without repeating one within a conversation.
type gen struct {
	rng  *rand.Rand
	used map[string]bool
}

// pick returns an unused entry of pool (falling back to a used one only when
// all are taken, which check then reports as a collision).
func (g *gen) pick(pool ...string) string {
	for _, i := range g.rng.Perm(len(pool)) {
		if !g.used[strings.ToLower(pool[i])] {
			g.used[strings.ToLower(pool[i])] = true
			return pool[i]
		}
	}
	return pool[g.rng.IntN(len(pool))]
}

// amount returns a fresh four-digit amount that is not a round figure,
// written with the thousands separator of the language ("4.750", "4,750").
func (g *gen) amount(pt bool) string {
	for {
		n := 1100 + 10*g.rng.IntN(880)
		if n%500 == 0 {
			continue
		}
		sep := ","
		if pt {
			sep = "."
		}
		s := fmt.Sprintf("%d%s%03d", n/1000, sep, n%1000)
		key := fmt.Sprint(n)
		if !g.used[key] {
			g.used[key] = true
			return s
		}
	}
}

var monthsEN = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
var monthsPT = []string{"janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto", "setembro", "outubro", "novembro", "dezembro"}

// date returns a fresh day-and-month ("12 March", "12 de março").
func (g *gen) date(pt bool) string {
	for {
		d, m := 1+g.rng.IntN(28), g.rng.IntN(12)
		key := fmt.Sprintf("date %d %d", d, m)
		if g.used[key] {
			continue
		}
		g.used[key] = true
		if pt {
			return fmt.Sprintf("%d de %s", d, monthsPT[m])
		}
		return fmt.Sprintf("%d %s", d, monthsEN[m])
	}
}

var firstNames = []string{"Ana", "Beatriz", "Carlos", "Duarte", "Inês", "Joana", "Marta", "Rui", "Sofia", "Tiago",
	"Priya", "Kenji", "Olga", "Femi", "Helena", "Miguel", "Clara", "Nuno", "Rita", "Bruno", "Leonor", "Hugo", "Yara", "Ivo"}

func (g *gen) name() string { return g.pick(firstNames...) }

// pt reports whether to phrase the next item in Portuguese (one time in three).
func (g *gen) pt() bool { return g.rng.IntN(3) == 0 }

// bank draws one item of a category.
type bank func(g *gen) planted

// banks are the item templates per category, phrased the way users talk.
var banks = map[Category][]bank{
	Numbers: {
		func(g *gen) planted {
			a := g.amount(false)
			return planted{statement: "My rent is €" + a + " a month, which is a lot for this neighbourhood.", question: "How much do I pay in rent each month?", indirect: "Is my housing cost reasonable for a two-bedroom place?", value: a}
		},
		func(g *gen) planted {
			a := g.amount(false)
			return planted{statement: "I paid $" + a + " for the new laptop, I hope it lasts.", question: "How much did my new laptop cost?", indirect: "Was my last computer purchase expensive?", value: a}
		},
		func(g *gen) planted {
			a := g.amount(true)
			return planted{statement: "Meu salário agora é R$ " + a + " por mês.", question: "Quanto é o meu salário por mês?", indirect: "Quanto eu ganho?", value: a}
		},
		func(g *gen) planted {
			a := g.amount(false)
			return planted{statement: "The quote for fixing the roof came in at €" + a + ", ouch.", question: "What was the quote for the roof repair?", indirect: "How much will the work on the house set me back?", value: a}
		},
		func(g *gen) planted {
			a := g.amount(true)
			return planted{statement: "Gastei R$ " + a + " no conserto do carro.", question: "Quanto eu gastei no conserto do carro?", indirect: "Quanto custou arrumar o automóvel?", value: a}
		},
	},
	Dates: {
		func(g *gen) planted {
			d := g.date(false)
			return planted{statement: "My dentist appointment is on " + d + ", in the morning.", question: "When is my dentist appointment?", indirect: "When do I need to get my teeth checked?", value: d}
		},
		func(g *gen) planted {
			d := g.date(false)
			return planted{statement: "My sister " + g.name() + " is visiting on " + d + ".", question: "When is my sister visiting?", indirect: "When does my family arrive?", value: d}
		},
		func(g *gen) planted {
			d := g.date(true)
			return planted{statement: "Meu passaporte vence em " + d + ".", question: "Quando vence o meu passaporte?", indirect: "Até quando posso viajar com os documentos atuais?", value: d}
		},
		func(g *gen) planted {
			d := g.date(false)
			return planted{statement: "The conference I'm speaking at starts on " + d + ".", question: "When does the conference I'm speaking at start?", indirect: "When do I give my talk?", value: d}
		},
		func(g *gen) planted {
			d := g.date(true)
			return planted{statement: "A festa de aniversário do meu filho é dia " + d + ".", question: "Quando é a festa de aniversário do meu filho?", indirect: "Quando vamos comemorar com o menino?", value: d}
		},
		func(g *gen) planted {
			d := g.date(false)
			return planted{statement: "My visa interview is scheduled for " + d + ".", question: "When is my visa interview?", indirect: "When is my embassy appointment?", value: d}
		},
	},
	Names: {
		func(g *gen) planted {
			n := g.name()
			return planted{statement: "My new manager is called " + n + ", she seems nice.", question: "What's my new manager's name?", indirect: "Who is my boss?", value: n}
		},
		func(g *gen) planted {
			n := g.name()
			return planted{statement: "We adopted a puppy and named him " + n + ".", question: "What did we name our puppy?", indirect: "What's our dog called?", value: n}
		},
		func(g *gen) planted {
			n := g.name()
			return planted{statement: "Minha melhor amiga se chama " + n + ".", question: "Como se chama a minha melhor amiga?", indirect: "Qual amiga é a mais próxima de mim?", value: n}
		},
		func(g *gen) planted {
			n := g.name()
			return planted{statement: "My landlord, " + n + ", finally fixed the heating.", question: "What's my landlord's name?", indirect: "Who owns the flat I rent?", value: n}
		},
		func(g *gen) planted {
			n := g.name()
			return planted{statement: "My daughter's piano lessons are with " + n + " on weekends.", question: "Who gives my daughter piano lessons?", indirect: "Who teaches music to my kid?", value: n}
		},
		func(g *gen) planted {
			n := g.name()
			return planted{statement: "O nome do meu médico é Dr. " + n + ".", question: "Qual é o nome do meu médico?", indirect: "Quem cuida da minha saúde?", value: n}
		},
	},
	Preferences: {
		func(g *gen) planted {
			s := g.pick("window", "aisle")
			return planted{statement: "On flights I always prefer " + s + " seats.", question: "Which seat should I ask for when I book my flight?", indirect: "Any tips for booking my next trip by plane?", value: s}
		},
		func(g *gen) planted {
			d := g.pick("green tea", "mint tea", "hot chocolate", "kombucha")
			return planted{statement: "I prefer " + d + " over coffee, honestly.", question: "What do I like to drink instead of coffee?", indirect: "What should I order at the café?", value: d}
		},
		func(g *gen) planted {
			f := g.pick("terror", "comédia", "suspense", "animação")
			return planted{statement: "Prefiro filmes de " + f + ".", question: "Que tipo de filme eu prefiro?", indirect: "Que filme você me indica para hoje à noite?", value: f}
		},
		func(g *gen) planted {
			c := g.pick("Thai", "Ethiopian", "Peruvian", "Korean", "Lebanese")
			return planted{statement: "I love " + c + " food, it's my favourite.", question: "What's my favourite cuisine?", indirect: "Where should we go for dinner tonight?", value: c}
		},
		func(g *gen) planted {
			s := g.pick("swimming", "cycling", "climbing", "rowing")
			return planted{statement: "I'd rather exercise by " + s + " than go to a gym.", question: "How do I like to exercise?", indirect: "Can you plan a workout routine for me?", value: s}
		},
		func(g *gen) planted {
			m := g.pick("jazz", "bossa nova", "fado", "música clássica")
			return planted{statement: "Eu gosto de ouvir " + m + " enquanto trabalho.", question: "Que música eu gosto de ouvir no trabalho?", indirect: "Monta uma playlist para eu me concentrar?", value: m}
		},
	},
	Goals: {
		func(g *gen) planted {
			a := g.amount(true)
			return planted{statement: "I want to save R$ " + a + " by " + monthsEN[g.rng.IntN(12)] + ".", question: "How much money do I want to save?", indirect: "What's my money target?", value: a}
		},
		func(g *gen) planted {
			c := g.pick("Valencia", "Rotterdam", "Seattle", "Melbourne")
			return planted{statement: "My goal is to run a half marathon in " + c + ".", question: "Where do I want to run a half marathon?", indirect: "Where is the race I'm training for?", value: c}
		},
		func(g *gen) planted {
			l := g.pick("alemão", "japonês", "italiano", "mandarim")
			return planted{statement: "Quero aprender " + l + " até o fim do ano.", question: "Que idioma eu quero aprender?", indirect: "Qual língua estou estudando?", value: l}
		},
		func(g *gen) planted {
			c := g.pick("Japan", "Iceland", "Vietnam", "Morocco", "Chile")
			return planted{statement: "I'm planning to visit " + c + " next year with my partner.", question: "Which country am I planning to visit next year?", indirect: "Where are we travelling next year?", value: c}
		},
		func(g *gen) planted {
			a := g.amount(false)
			return planted{statement: "I need to pay off a loan of €" + a + " before I can move.", question: "How big is the loan I need to pay off?", indirect: "How much debt do I have left to clear?", value: a}
		},
	},
	Changed: {
		func(g *gen) planted {
			old, cur := g.pick("Lisbon", "Madrid", "Berlin", "Vienna", "Dublin"), g.pick("Porto", "Seville", "Hamburg", "Prague", "Cork")
			if g.pt() {
				return planted{oldStatement: "Eu moro em " + old + ", num apartamento pequeno.", old: old,
					statement: "Me mudei para " + cur + " no mês passado.", question: "Em que cidade eu moro agora?", indirect: "Pode me indicar um restaurante perto de casa?", value: cur}
			}
			return planted{oldStatement: "I live in " + old + ", in a small flat near the river.", old: old,
				statement: "I moved to " + cur + " last month and I'm still unpacking.", question: "Which city do I live in these days?", indirect: "Can you recommend a restaurant near my home?", value: cur}
		},
		func(g *gen) planted {
			old, cur := g.pick("nurse", "teacher", "accountant", "architect"), g.pick("data analyst", "chef", "pilot", "translator")
			return planted{oldStatement: "I work as a " + old + ", the hours are long.", old: old,
				statement: "I changed careers, I'm a " + cur + " now.", question: "What is my job now?", indirect: "Can you help me update my CV headline?", value: cur}
		},
		func(g *gen) planted {
			pairs := [][2]string{{"vegetarian", "vegan"}, {"vegan", "pescatarian"}, {"pescatarian", "vegetarian"}}
			p := pairs[g.rng.IntN(len(pairs))]
			return planted{oldStatement: "I'm " + p[0] + ", so keep that in mind for recipes.", old: p[0],
				statement: "Diet update: I'm " + p[1] + " now.", question: "What diet do I follow these days?", indirect: "Suggest a dinner recipe for me.", value: p[1]}
		},
		func(g *gen) planted {
			old, cur := g.pick("Panda", "Clio", "Polo", "Corsa"), g.pick("Corolla", "Civic", "Octavia", "Yaris")
			return planted{oldStatement: "I drive an old " + old + " to work.", old: old,
				statement: "I finally got a new car, a " + cur + "!", question: "What car do I drive now?", indirect: "What kind of fuel does my vehicle need?", value: cur}
		},
		func(g *gen) planted {
			pt := g.pt()
			old, cur := g.amount(pt), g.amount(pt)
			if pt {
				return planted{oldStatement: "Meu orçamento para restaurantes é R$ " + old + " por mês.", old: old,
					statement: "Reduzi meu orçamento de restaurantes para R$ " + cur + " por mês.", question: "Qual é o meu orçamento mensal para restaurantes agora?", indirect: "Quanto posso gastar comendo fora este mês?", value: cur}
			}
			return planted{oldStatement: "My monthly budget for eating out is $" + old + ".", old: old,
				statement: "I'm cutting my eating-out budget to $" + cur + " a month.", question: "What's my monthly budget for eating out now?", indirect: "How much can I spend on restaurants this month?", value: cur}
		},
	},
}

// minBank is the size of the smallest bank: the most items per category.
func minBank() int {
	n := -1
	for _, b := range banks {
		if n < 0 || len(b) < n {
			n = len(b)
		}
	}
	return n
}
