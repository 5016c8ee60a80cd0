package redact

import "strings"

// findCards returns the spans of the card numbers in s: runs of 13–19
// digits, separated at most by single spaces or dashes, standing as a word of
// their own, that cardNumber accepts. In a longer run the longest leading
// groups that form a card are taken (a card number followed by a year). Only
// the leading groups that hold 19 digits or fewer are tried, so a long run of
// digit groups costs one pass.
func findCards(s string, m *meter) []span {
	var out []span
	for i := 0; i < len(s); {
		if !isDigit(s[i]) || (i > 0 && isWordByte(s[i-1])) {
			i++
			m.add(1)
			continue
		}
		// Extend the run; ends[:n] are the indexes after the leading
		// groups that hold at most 19 digits.
		var ends [19]int
		n, digits := 0, 0
		j := i
		for {
			k := runEnd(s, j, isDigit, m)
			digits += k - j
			if digits <= 19 {
				ends[n] = k
				n++
			}
			j = k
			if j+1 < len(s) && (s[j] == ' ' || s[j] == '-') && isDigit(s[j+1]) {
				j++
				continue
			}
			break
		}
		if j < len(s) && isWordByte(s[j]) {
			i = j // glued to letters: an id, not a card
			continue
		}
		for k := n - 1; k >= 0; k-- {
			if cardNumber(s[i:ends[k]]) {
				m.add(ends[k] - i)
				out = append(out, span{i, ends[k], "card"})
				break
			}
		}
		i = j
	}
	return out
}

// cardNumber reports whether s (digits with optional single spaces or
// dashes) is a plausible payment card number: 13–19 digits with a length
// its issuer uses, grouped the way cards are written, and a valid Luhn
// checksum. Phone numbers, amounts and ids mostly fail one of these.
func cardNumber(s string) bool {
	if len(s) < 13 || len(s) > 2*19 {
		return false
	}
	var digitBuf [19]byte
	var groupBuf [19]int
	digits, groups := digitBuf[:0], groupBuf[:0]
	sep := byte(0)
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			if len(digits) == 19 {
				return false
			}
			digits = append(digits, c)
			run++
			continue
		}
		if sep != 0 && c != sep || len(groups) == 18 {
			return false // mixed separators, or too many groups
		}
		sep = c
		groups = append(groups, run)
		run = 0
	}
	groups = append(groups, run)
	if len(digits) < 13 {
		return false
	}
	if !issuerLength(digits) || !grouped(groups) {
		return false
	}
	return luhn(digits)
}

// issuerLength reports whether the number's length fits its issuer prefix
// (Visa, Mastercard, Amex, Diners, JCB, Discover, UnionPay, Maestro).
func issuerLength(digits []byte) bool {
	n := len(digits)
	d := string(digits[:4]) // (no allocation: the conversion stays local)
	switch {
	case d[0] == '4': // Visa
		return n == 13 || n == 16 || n == 19
	case strings.HasPrefix(d, "34"), strings.HasPrefix(d, "37"): // Amex
		return n == 15
	case strings.HasPrefix(d, "36"), strings.HasPrefix(d, "38"), strings.HasPrefix(d, "30"): // Diners
		return n >= 14 && n <= 19
	case strings.HasPrefix(d, "35"): // JCB
		return n >= 16 && n <= 19
	case d[0] == '5': // Mastercard 51–55, Maestro 50, 56–59
		if d[1] >= '1' && d[1] <= '5' {
			return n == 16
		}
		return n >= 13 && n <= 19 && (d[1] == '0' || d[1] >= '6')
	case d[0] == '2': // Mastercard 2221–2720
		return n == 16 && d[:4] >= "2221" && d[:4] <= "2720"
	case d[0] == '6': // Discover, UnionPay, Maestro
		return n >= 13 && n <= 19
	}
	return false
}

// grouped reports whether digit groups look like a written card number: one
// unbroken run, fours with a shorter tail (4-4-4-4, 4-4-4-4-3), or the
// 4-6-5 / 4-6-4 grouping of Amex and Diners.
func grouped(g []int) bool {
	if len(g) == 1 {
		return true
	}
	if len(g) == 3 && g[0] == 4 && g[1] == 6 && (g[2] == 5 || g[2] == 4) {
		return true
	}
	for i, n := range g {
		last := i == len(g)-1
		if (!last && n != 4) || (last && (n < 1 || n > 4)) {
			return false
		}
	}
	return true
}

// luhn reports whether the ASCII digits pass the Luhn checksum.
func luhn(digits []byte) bool {
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}
