package redact

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// Samples for the gaps issue 15 found (stored raw before), assembled so no
// scanner mistakes this file for a leak. awsSecret is the example key of the
// AWS documentation.
var (
	awsSecret = "wJalrXUtnFEMI/" + "K7MDENG/bPxRfiCYEXAMPLEKEY"
	pgpKey    = "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGVz" + "kZ8BCADHx8m1v1pF9m3s+Qk0\n=Xt4h\n-----END PGP PRIVATE KEY BLOCK-----"
)

func TestStringGaps(t *testing.T) {
	runStringCases(t, []redactCase{
		// AWS secret access keys.
		{"aws credentials file", "[default]\naws_access_key_id = " + awsKey + "\naws_secret_access_key = " + awsSecret + "\n",
			"[default]\naws_access_key_id = [redacted:aws_access_key]\naws_secret_access_key = [redacted:aws_secret_key]\n", 2},
		{"aws env export", "export AWS_SECRET_ACCESS_KEY=\"" + awsSecret + "\"", "export AWS_SECRET_ACCESS_KEY=\"[redacted:aws_secret_key]\"", 1},
		{"aws secret in prose", "my AWS secret is " + awsSecret + ", keep it safe", "my AWS secret is [redacted:aws_secret_key], keep it safe", 1},
		{"aws csv pair", awsKey + "," + awsSecret, "[redacted:aws_access_key],[redacted:aws_secret_key]", 2},
		{"aws secret in json text", `{"AccessKeyId": "` + awsKey + `", "SecretAccessKey": "` + awsSecret + `"}`,
			`{"AccessKeyId": "[redacted:aws_access_key]", "SecretAccessKey": "[redacted:aws_secret_key]"}`, 2},
		// PGP private key blocks.
		{"pgp private key block", "here it is:\n" + pgpKey + "\nthanks", "here it is:\n[redacted:private_key]\nthanks", 1},
		{"pgp block cut off", "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBGVzkZ8B", "[redacted:private_key]", 1},
		// Credential fields in text.
		{"json snippet", `curl -d '{"user":"ana","password":"hunter2!"}' https://api.example.com`,
			`curl -d '{"user":"ana","password":"[redacted:password]"}' https://api.example.com`, 1},
		{"python dict", `creds = {'api_key': 'k-7f3a9c', 'region': 'eu'}`, `creds = {'api_key': '[redacted:api_key]', 'region': 'eu'}`, 1},
		{"env file", "DB_HOST=db.internal\nDB_PASSWORD=s3cr3t-Pa55\nSTRIPE_SECRET=rk_live_51Hx", "DB_HOST=db.internal\nDB_PASSWORD=[redacted:password]\nSTRIPE_SECRET=[redacted:secret]", 2},
		{"query string token", "GET /cb?code=1&access_token=ya29.a0AfH6&state=x", "GET /cb?code=1&access_token=[redacted:token]&state=x", 1},
		{"tool call line", `[tool_call login({"username":"ana","passwd":"hunter2"})]`, `[tool_call login({"username":"ana","passwd":"[redacted:password]"})]`, 1},
		{"camel case client secret", `{"clientSecret": "GOCSPX-1a2b3c"}`, `{"clientSecret": "[redacted:secret]"}`, 1},
		{"authorization header in json", `{"Authorization": "Basic dXNlcjpwYXNz"}`, `{"Authorization": "[redacted:token]"}`, 1},
		{"numeric cvv", `{"cvv": 123}`, `{"cvv": [redacted:card_cvv]}`, 1},
		// Ordinary text that must survive.
		{"git sha near secret", "the secret fix is commit 3f786850e387550fdab836ed7e6dc881de23001b", "the secret fix is commit 3f786850e387550fdab836ed7e6dc881de23001b", 0},
		{"base64 without context", "checksum: " + strings.Repeat("Ab1/", 10), "checksum: " + strings.Repeat("Ab1/", 10), 0},
		{"aws prose without key", "AWS secret keys are 40 characters long", "AWS secret keys are 40 characters long", 0},
		{"pgp public key", "-----BEGIN PGP PUBLIC KEY BLOCK-----\nmQENBF\n-----END PGP PUBLIC KEY BLOCK-----", "-----BEGIN PGP PUBLIC KEY BLOCK-----\nmQENBF\n-----END PGP PUBLIC KEY BLOCK-----", 0},
		{"pgp signature", "-----BEGIN PGP SIGNATURE-----\niQEz\n-----END PGP SIGNATURE-----", "-----BEGIN PGP SIGNATURE-----\niQEz\n-----END PGP SIGNATURE-----", 0},
		{"password advice", "Password: at least 8 characters, and never reuse a password.", "Password: at least 8 characters, and never reuse a password.", 0},
		{"token counts", "max_tokens=256 and token_type=bearer, 1200 tokens used", "max_tokens=256 and token_type=bearer, 1200 tokens used", 0},
		{"comparison", `if password == "" { return }`, `if password == "" { return }`, 0},
		{"secretary", `{"secretary": "Ana Souza", "has_password": true, "password": null}`, `{"secretary": "Ana Souza", "has_password": true, "password": null}`, 0},
		{"apostrophes", "I don't know where the token's stored, it's fine", "I don't know where the token's stored, it's fine", 0},
		{"empty password", `{"password": ""}`, `{"password": ""}`, 0},
	})
}

func TestJSONGaps(t *testing.T) {
	runJSONCases(t, []redactCase{
		{
			name: "credential fields in tool-call arguments",
			in:   `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"login","arguments":"{\"username\":\"ana\",\"password\":\"hunter2\",\"api_key\":\"k-7f3a9c\",\"auth\":{\"refresh_token\":\"1//0gLx\"}}"}}]}`,
			want: `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"login","arguments":"{\"username\":\"ana\",\"password\":\"[redacted:password]\",\"api_key\":\"[redacted:api_key]\",\"auth\":{\"refresh_token\":\"[redacted:token]\"}}"}}]}`,
			n:    3,
		},
		{
			name: "credential fields in a tool result",
			in:   `{"role":"tool","tool_call_id":"c1","content":"{\"ok\":true,\"session_token\":\"eyQ29f0a\",\"pin\":42}"}`,
			want: `{"role":"tool","tool_call_id":"c1","content":"{\"ok\":true,\"session_token\":\"[redacted:token]\",\"pin\":42}"}`,
			n:    1,
		},
		{
			name: "numeric credential becomes a string",
			in:   `{"password": 123456, "x-api-key": "abc"}`,
			want: `{"password": "[redacted:password]", "x-api-key": "[redacted:api_key]"}`,
			n:    2,
		},
		{
			name: "card number as a JSON number",
			in:   `{"card_number": 4111111111111111, "amount": 1234.56, "phone": 5511999999999}`,
			want: `{"card_number": "[redacted:card]", "amount": 1234.56, "phone": 5511999999999}`,
			n:    1,
		},
		{
			name: "card number as a number in arguments",
			in:   `{"arguments":"{\"card\":5500000000000004,\"exp\":\"12/27\"}"}`,
			want: `{"arguments":"{\"card\":\"[redacted:card]\",\"exp\":\"12/27\"}"}`,
			n:    1,
		},
		{
			name: "secret as an object key",
			in:   `{"keys":{"` + openaiKey + `":"prod","` + awsKey + `":"ci"}}`,
			want: `{"keys":{"[redacted:openai_key]":"prod","[redacted:aws_access_key]":"ci"}}`,
			n:    2,
		},
		{
			name: "aws secret under its key",
			in:   `{"aws_secret_access_key":"` + awsSecret + `","github":"` + ghToken + `"}`,
			want: `{"aws_secret_access_key":"[redacted:secret]","github":"[redacted:github_token]"}`,
			n:    2,
		},
		{
			name: "recognised secret under a credential key keeps its kind",
			in:   `{"token":"` + ghToken + `"}`,
			want: `{"token":"[redacted:github_token]"}`,
			n:    1,
		},
		{
			name: "pgp block in content",
			in:   `{"role":"user","content":` + quoteTest(pgpKey) + `}`,
			want: `{"role":"user","content":"[redacted:private_key]"}`,
			n:    1,
		},
		{
			name: "ordinary tool call kept byte for byte",
			in:   `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Porto\",\"days\":3,\"token_budget\":500}"}}]}`,
			want: `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Porto\",\"days\":3,\"token_budget\":500}"}}]}`,
		},
		{
			name: "credential keys with no secret value",
			in:   `{"password":null,"token":{"type":"x"},"secret":false,"api_key":[]}`,
			want: `{"password":null,"token":{"type":"x"},"secret":false,"api_key":[]}`,
		},
	})
}

// TestMessageToolCallContent checks the Content derived from a tool call
// (its "[tool_call name(arguments)]" line) loses the credential too.
func TestMessageToolCallContent(t *testing.T) {
	r := mustNew(t, nil)
	m, err := memory.ParseMessage(json.RawMessage(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"login","arguments":"{\"user\":\"ana\",\"password\":\"hunter2\"}"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Content, "hunter2") {
		t.Fatalf("fixture: Content %q does not carry the arguments", m.Content)
	}
	got, n, err := r.Message(m)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || strings.Contains(got.Content, "hunter2") || strings.Contains(string(got.Raw), "hunter2") {
		t.Fatalf("Message = %q %s (%d)", got.Content, got.Raw, n)
	}
}
