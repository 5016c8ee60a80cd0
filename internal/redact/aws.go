package redact

import "strings"

// AWS secret access keys are 40 characters of base64 ([A-Za-z0-9/+]) with
// nothing to tell them from other base64 but their surroundings. findAWSSecrets
// takes a 40-character run, standing alone (no base64 character or '=' on
// either side), that mixes upper and lower case with a digit, '/' or '+', and
// follows — within awsContext bytes on the same line — "aws", "secret" or an
// access key id (AKIA…/ASIA…). Git hashes (hex, one case), words and ids
// fail the mix; other base64 fails the context.

// awsContext is how far before a candidate the context may be.
const awsContext = 80

// findAWSSecrets returns the spans of the AWS secret access keys in s.
func findAWSSecrets(s string, m *meter) []span {
	var out []span
	for i := 0; i+40 <= len(s); {
		if !isBase64Byte(s[i]) || i > 0 && (isBase64Byte(s[i-1]) || s[i-1] == '=') {
			i++
			m.add(1)
			continue
		}
		j := runEnd(s, i, isBase64Byte, m)
		if j-i == 40 && (j == len(s) || s[j] != '=') && mixed(s[i:j]) && awsNearby(s, i, m) {
			out = append(out, span{i, j, "aws_secret_key"})
		}
		i = j
	}
	return out
}

func isBase64Byte(c byte) bool { return isWordByte(c) && c != '_' || c == '/' || c == '+' }

// mixed reports whether s has an upper- and a lower-case letter and a digit,
// '/' or '+'.
func mixed(s string) bool {
	var upper, lower, other bool
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		default:
			other = true
		}
	}
	return upper && lower && other
}

// awsNearby reports whether the awsContext bytes before at, on the same
// line, mention AWS, a secret or an access key id.
func awsNearby(s string, at int, m *meter) bool {
	from := max(0, at-awsContext)
	ctx := s[from:at]
	if nl := strings.LastIndexByte(ctx, '\n'); nl >= 0 {
		ctx = ctx[nl+1:]
	}
	m.add(4 * len(ctx))
	return index(ctx, "aws", true) >= 0 || index(ctx, "secret", true) >= 0 ||
		strings.Contains(ctx, "AKIA") || strings.Contains(ctx, "ASIA") || strings.Contains(ctx, "[redacted:aws_access_key]")
}
