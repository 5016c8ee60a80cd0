package lexicon

// functionWords are English words that carry grammar rather than topic:
// pronouns, determiners, prepositions, conjunctions, auxiliaries and modals,
// the pieces the tokenizer leaves of contractions ("don't" → "don"), common
// adverbs and the lightest verbs. WordNet lists many of them as nouns or
// verbs ("who" the World Health Organization, "have" a rich person, "can"
// a container), so their concepts would be noise.
var functionWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range []string{
		// pronouns and determiners
		"all", "another", "any", "anybody", "anyone", "anything", "both", "each", "either", "every",
		"everybody", "everyone", "everything", "few", "her", "hers", "herself", "him", "himself", "his",
		"its", "itself", "many", "mine", "more", "most", "much", "myself", "neither", "none", "nobody",
		"nothing", "one", "ones", "other", "others", "ours", "ourselves", "she", "some", "somebody",
		"someone", "something", "such", "that", "the", "their", "theirs", "them", "themselves", "these",
		"they", "this", "those", "what", "whatever", "which", "who", "whom", "whose", "you", "your",
		"yours", "yourself", "our", "thing", "things", "stuff", "lot", "lots",
		// prepositions and conjunctions
		"about", "above", "across", "after", "against", "along", "among", "around", "because", "before",
		"behind", "below", "beneath", "beside", "between", "beyond", "but", "despite", "down", "during",
		"except", "for", "from", "if", "inside", "into", "like", "near", "nor", "off", "onto", "out",
		"outside", "over", "past", "per", "since", "than", "though", "through", "till", "toward",
		"towards", "under", "unless", "until", "upon", "via", "when", "where", "whether", "while",
		"why", "how", "with", "within", "without", "yet", "and", "not",
		// auxiliaries and modals
		"are", "been", "being", "can", "could", "did", "does", "doing", "done", "had", "has", "have",
		"having", "may", "might", "must", "shall", "should", "was", "were", "will", "would", "ought",
		// pieces of contractions
		"don", "didn", "doesn", "isn", "wasn", "weren", "aren", "couldn", "wouldn", "shouldn", "won",
		"ain", "hasn", "haven", "hadn", "mustn", "needn", "let",
		// common adverbs and discourse words
		"again", "ago", "almost", "already", "also", "always", "anyway", "back", "even", "ever",
		"here", "just", "maybe", "never", "now", "often", "only", "perhaps", "quite", "rather",
		"really", "so", "sometimes", "soon", "still", "then", "there", "too", "very", "well",
		"yes", "yeah", "okay", "hey", "thanks", "please", "sure", "today", "tonight", "tomorrow",
		"yesterday",
		// the lightest verbs
		"get", "gets", "got", "gotten", "getting", "make", "makes", "made", "making", "take",
		"takes", "took", "taken", "taking", "go", "goes", "went", "gone", "going", "come", "comes",
		"came", "coming", "say", "says", "said", "saying", "put", "puts", "putting", "seem", "seems",
		"seemed", "keep", "keeps", "kept", "mean", "means", "meant", "way", "ways", "kind", "sort",
	} {
		m[w] = true
	}
	return m
}()

// FunctionWord reports whether word (lower case) is an English function
// word, one the lexicon gives no concepts.
func FunctionWord(word string) bool { return functionWords[word] }
