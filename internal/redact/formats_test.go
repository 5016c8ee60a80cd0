package redact

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// Fake credentials in the providers' formats, assembled so that no scanner
// mistakes this file for a leak.
var (
	stripeKey   = "sk_" + "live_" + "51H8xQ2eZvKYlo2C7a9Xb3PqRsTuVwXyZ0aBcDeFgHiJkLmN"
	stripeRK    = "rk_" + "live_" + "51H8xQ2eZvKYlo2CkLmNoPqRsT"
	stripeTest  = "sk_" + "test_" + "4eC39HqLyjWDarjtT1zdp7dc"
	googleKey   = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
	gitlabPAT   = "glpat-" + "xK9vR2mT7pQ4wL8nZ3yB"
	hfToken     = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH"
	sendgridKey = "SG." + "ngeVfQFYQlKU0ufo8x5d1A" + "." + "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc-1s5cr"
	npmToken    = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
	twilioKey   = "SK" + "2a1f7c9e4b3d8f6a0c5e7b9d1f3a5c7e"
	slackHook   = "https://hooks.slack.com/services/" + "T024BE7LD/B01ABCD2EFG/" + "xY9zKq3mNp7RtV2wLs8Bd4Fh"
	discordHook = "https://discord.com/api/webhooks/" + "1133445566778899001/" + "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5zA7bC9dE1fG3hI5jK7lM9nO1pQ3r"
	azureKey    = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsu" + "Fq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
	basicCreds  = "YWxhZGRpbjpv" + "cGVuc2VzYW1l"
)

// TestStringFormats covers the credential formats issue 24 found stored
// verbatim, and their look-alikes that must survive.
func TestStringFormats(t *testing.T) {
	runStringCases(t, []redactCase{
		// Provider keys.
		{"stripe live secret", "STRIPE key: " + stripeKey + " (prod)", "STRIPE key: [redacted:stripe_key] (prod)", 1},
		{"stripe restricted", "use " + stripeRK + ".", "use [redacted:stripe_key].", 1},
		{"stripe test", "stripe.api_key = '" + stripeTest + "'", "stripe.api_key = '[redacted:stripe_key]'", 1},
		{"google api key", "maps?key=" + googleKey + "&q=Lisboa", "maps?key=[redacted:google_api_key]&q=Lisboa", 1},
		{"gitlab pat", "git clone with " + gitlabPAT + " please", "git clone with [redacted:gitlab_token] please", 1},
		{"hugging face", "HF token " + hfToken + " for the hub", "HF token [redacted:huggingface_token] for the hub", 1},
		{"sendgrid", "SENDGRID: " + sendgridKey, "SENDGRID: [redacted:sendgrid_key]", 1},
		{"npm", "//registry.npmjs.org/:_authToken=" + npmToken, "//registry.npmjs.org/:_authToken=[redacted:npm_token]", 1},
		{"twilio api key sid", "twilio key " + twilioKey + " and secret below", "twilio key [redacted:twilio_key] and secret below", 1},
		{"openai still", "sk-" + "proj-" + "Zx81nQe2LkPq0sVb7YtRw3MuA9" + " works", "[redacted:openai_key] works", 1},
		{"anthropic", "ANTHROPIC_API_KEY=" + "sk-" + "ant-api03-" + "aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0", "ANTHROPIC_API_KEY=[redacted:openai_key]", 1},
		// Credentials in URLs.
		{"postgres url", "DATABASE_URL=postgres://app:Xk9#pQ2v@db.internal:5432/prod?sslmode=require",
			"DATABASE_URL=postgres://app:[redacted:url_password]@db.internal:5432/prod?sslmode=require", 1},
		{"https user and token", "git remote add origin https://ana:tok3nV4lue@git.example.com/team/repo.git",
			"git remote add origin https://ana:[redacted:url_password]@git.example.com/team/repo.git", 1},
		{"redis password only", "redis://:s3cretpass@cache:6379/0", "redis://:[redacted:url_password]@cache:6379/0", 1},
		{"mongodb srv with @ in password", "mongodb+srv://admin:p@ss:w0rd@cluster0.ab1cd.mongodb.net/app",
			"mongodb+srv://admin:[redacted:url_password]@cluster0.ab1cd.mongodb.net/app", 1},
		{"url template kept", "postgres://user:${DB_PASSWORD}@localhost/app and https://user:<token>@host",
			"postgres://user:${DB_PASSWORD}@localhost/app and https://user:<token>@host", 0},
		{"url without password kept", "ssh://git@github.com:22/x and http://localhost:8080/a@b", "ssh://git@github.com:22/x and http://localhost:8080/a@b", 0},
		// Authorization headers of any scheme.
		{"basic header", "Authorization: Basic " + basicCreds, "Authorization: Basic [redacted:authorization]", 1},
		{"basic in curl", "curl -H 'Authorization: Basic " + basicCreds + "' https://api.example.com",
			"curl -H 'Authorization: Basic [redacted:authorization]' https://api.example.com", 1},
		{"token scheme", "Authorization: token 7f3a9c2e1b4d", "Authorization: token [redacted:authorization]", 1},
		{"digest", "Authorization: Digest username=\"Mufasa\", realm=\"x@host\", nonce=\"dcd98b71\", response=\"6629fae49393a05397450978507c4ef1\"\nAccept: */*",
			"Authorization: Digest [redacted:authorization]\nAccept: */*", 1},
		{"proxy authorization", "Proxy-Authorization: Basic " + basicCreds, "Proxy-Authorization: Basic [redacted:authorization]", 1},
		{"header in a sentence", "my header is Authorization: Basic " + basicCreds + " and it fails", "my header is Authorization: Basic [redacted:authorization] and it fails", 1},
		{"header words kept", "send Authorization: Basic credentials are base64 encoded", "send Authorization: Basic credentials are base64 encoded", 0},
		{"no scheme", "authorization: 9f8e7d6c5b4a39281706", "authorization: [redacted:authorization]", 1},
		{"api key header", "curl -H \"X-Api-Key: a8f5f167f44f4964e6c998dee827110c\" https://x", "curl -H \"X-Api-Key: [redacted:api_key]\" https://x", 1},
		{"private token header", "Private-Token: " + "Zx81nQe2LkPq0sVb", "Private-Token: [redacted:token]", 1},
		{"yaml password", "db:\n  user: app\n  password: Tr0ub4dor&3\n", "db:\n  user: app\n  password: [redacted:password]\n", 1},
		{"yaml quoted", "  client_secret: \"GOCSPX-abc\"", "  client_secret: \"[redacted:secret]\"", 1},
		{"authorization prose kept", "Authorization: pending approval from the manager", "Authorization: pending approval from the manager", 0},
		{"bearer prose in header kept", "Authorization: Bearer tokens are sent on every call", "Authorization: Bearer tokens are sent on every call", 0},
		{"yaml empty kept", "password: null\napi_key: ${API_KEY}\ntoken: |", "password: null\napi_key: ${API_KEY}\ntoken: |", 0},
		// Webhooks and connection strings.
		{"slack webhook", "post to " + slackHook + " when done", "post to https://hooks.slack.com/services/[redacted:slack_webhook] when done", 1},
		{"discord webhook", discordHook, "https://discord.com/api/webhooks/[redacted:discord_webhook]", 1},
		{"azure storage", "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=" + azureKey + ";EndpointSuffix=core.windows.net",
			"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=[redacted:secret];EndpointSuffix=core.windows.net", 1},
		{"azure service bus", "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=" + azureKey[:44],
			"Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=[redacted:secret]", 1},
		{"slack docs url kept", "see https://hooks.slack.com/services/ for details", "see https://hooks.slack.com/services/ for details", 0},
		// Prose, English.
		{"my password is", "my password is hunter2", "my password is [redacted:password]", 1},
		{"the password is", "The password is swordfish, don't tell anyone.", "The password is [redacted:password], don't tell anyone.", 1},
		{"wifi password", "Our wifi password is 'correct horse battery'.", "Our wifi password is '[redacted:password]'.", 1},
		{"password for", "the password for the router is Adm1n#7", "the password for the router is [redacted:password]", 1},
		{"password colon", "my email password: P4ssw0rd", "my email password: [redacted:password]", 1},
		{"password's", "My password's kittens99.", "My password's [redacted:password].", 1},
		{"password is now", "my password is now hunter3", "my password is now [redacted:password]", 1},
		{"my pin is", "my pin is 4821", "my pin is [redacted:pin]", 1},
		{"pin number", "My PIN number is 0937.", "My PIN number is [redacted:pin].", 1},
		{"door code", "the door code is 1234.", "the door code is [redacted:pin].", 1},
		{"access code", "the access code is 5521", "the access code is [redacted:pin]", 1},
		{"two in a row", "my password is hunter2 and my pin is 1234", "my password is [redacted:password] and my pin is [redacted:pin]", 2},
		{"api key in prose", "Here's my API key: 9f8e7d6c5b4a39281706abcdef", "Here's my API key: [redacted:api_key]", 1},
		{"token in prose", "my token is Zx81nQe2LkPq0sVb", "my token is [redacted:token]", 1},
		{"one-time code", "Your one-time code is 482913", "Your one-time code is [redacted:pin]", 1},
		{"going to be", "my new password is going to be hunter3", "my new password is going to be [redacted:password]", 1},
		{"token words kept", "the token is valid for an hour, the token limit is 4096", "the token is valid for an hour, the token limit is 4096", 0},
		// Prose, Portuguese.
		{"código de acesso", "o código de acesso é 7781", "o código de acesso é [redacted:pin]", 1},
		{"senha do e-mail", "minha senha do e-mail é Ana@1990", "minha senha do e-mail é [redacted:password]", 1},
		{"a minha senha é", "a minha senha é hunter2", "a minha senha é [redacted:password]", 1},
		{"minha senha colon", "minha senha: abacaxi", "minha senha: [redacted:password]", 1},
		{"senha do banco", "A senha do banco é 7788ab, não conta a ninguém", "A senha do banco é [redacted:password], não conta a ninguém", 1},
		{"meu pin", "o meu pin é 9931", "o meu pin é [redacted:pin]", 1},
		{"palavra-passe", "a minha palavra-passe é Lisboa2024", "a minha palavra-passe é [redacted:password]", 1},
		// Prose that is about passwords, not one.
		{"password advice", "My password is too short, the site says.", "My password is too short, the site says.", 0},
		{"password length", "my password is 12 characters long", "my password is 12 characters long", 0},
		{"password changed", "my password was changed yesterday", "my password was changed yesterday", 0},
		{"password same", "the password is the same as before", "the password is the same as before", 0},
		{"password manager", "my password manager is great", "my password manager is great", 0},
		{"password you gave", "the password you gave me is wrong", "the password you gave me is wrong", 0},
		{"password question", "what is my password? is it safe?", "what is my password? is it safe?", 0},
		{"pin length", "my pin is four digits", "my pin is four digits", 0},
		{"pin count", "your PIN is 4 digits long", "your PIN is 4 digits long", 0},
		{"senha fraca", "a minha senha é muito fraca", "a minha senha é muito fraca", 0},
		{"senha igual", "minha senha é igual à antiga", "minha senha é igual à antiga", 0},
		{"senha e and", "minha senha e meu email", "minha senha e meu email", 0},
		{"pin of bowling", "he knocked the last pin is what they said", "he knocked the last pin is what they said", 0},
		// Look-alikes.
		{"sk word", "use sk-learn-compatible-estimators-here", "use sk-learn-compatible-estimators-here", 0},
		{"hf identifier", "load hf_hub_download from the library", "load hf_hub_download from the library", 0},
		{"SKU", "SKU 4411 and SKETCH", "SKU 4411 and SKETCH", 0},
		{"SG word", "SG.com is a site", "SG.com is a site", 0},
	})
}

// TestIssue24Secrets sends the review's realistic secrets, each in the
// sentence a user would write, through Message as a chat message and as
// tool-call arguments: none may remain in the stored Content or Raw.
func TestIssue24Secrets(t *testing.T) {
	r := mustNew(t, nil)
	cases := []struct{ secret, text string }{
		{stripeKey, "here's our stripe key " + stripeKey},
		{googleKey, "Google Maps key: " + googleKey},
		{gitlabPAT, "my gitlab token is " + gitlabPAT},
		{hfToken, "export HF_TOKEN=" + hfToken},
		{sendgridKey, "sendgrid " + sendgridKey + " for the mailer"},
		{npmToken, "npm token " + npmToken},
		{twilioKey, "Twilio API key " + twilioKey},
		{"Xk9pQ2vL7", "connect to postgresql://app:Xk9pQ2vL7@db.prod.internal:5432/orders"},
		{basicCreds, "curl -H 'Authorization: Basic " + basicCreds + "' https://api.example.com"},
		{"xY9zKq3mNp7RtV2wLs8Bd4Fh", "webhook: " + slackHook},
		{azureKey, "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=" + azureKey + ";EndpointSuffix=core.windows.net"},
		{"hunter2", "my password is hunter2"},
		{"s3nh4Forte", "a minha senha é s3nh4Forte"},
		{"8413", "o meu pin é 8413"},
		{openaiKey, "OPENAI key " + openaiKey},
		{ghToken, "gh token " + ghToken},
		{awsSecret, "aws_secret_access_key=" + awsSecret},
		{jwt, "session " + jwt},
	}
	for _, tc := range cases {
		t.Run(tc.text[:min(30, len(tc.text))], func(t *testing.T) {
			for _, raw := range []string{
				`{"role":"user","content":` + quoteTest(tc.text) + `}`,
				`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"note","arguments":` + quoteTest(`{"text":`+quoteTest(tc.text)+`}`) + `}}]}`,
			} {
				m, err := memory.ParseMessage(json.RawMessage(raw))
				if err != nil {
					t.Fatal(err)
				}
				got, n, err := r.Message(m)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 || strings.Contains(got.Content, tc.secret) || strings.Contains(string(got.Raw), tc.secret) || !json.Valid(got.Raw) {
					t.Fatalf("secret kept (%d redactions): %q %s", n, got.Content, got.Raw)
				}
			}
		})
	}
}

func TestJSONFormats(t *testing.T) {
	runJSONCases(t, []redactCase{
		{
			name: "provider keys in tool-call arguments",
			in:   `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"configure","arguments":` + quoteTest(`{"stripe":"`+stripeKey+`","dsn":"postgres://app:Xk9pQ2vL7@db/app","hook":"`+slackHook+`"}`) + `}}]}`,
			want: `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"configure","arguments":` + quoteTest(`{"stripe":"[redacted:stripe_key]","dsn":"postgres://app:[redacted:url_password]@db/app","hook":"https://hooks.slack.com/services/[redacted:slack_webhook]"}`) + `}}]}`,
			n:    3,
		},
		{
			name: "prose password in content",
			in:   `{"role":"user","content":"a minha senha é hunter2, guarda-a"}`,
			want: `{"role":"user","content":"a minha senha é [redacted:password], guarda-a"}`,
			n:    1,
		},
		{
			name: "headers object",
			in:   `{"headers":{"Authorization":"Basic ` + basicCreds + `","X-Api-Key":"a8f5f167f44f4964"}}`,
			want: `{"headers":{"Authorization":"[redacted:token]","X-Api-Key":"[redacted:api_key]"}}`,
			n:    2,
		},
		{
			name: "templates and schemes alone kept",
			in:   `{"password":"${DB_PASSWORD}","Authorization":"Bearer ","api_key":"<YOUR_API_KEY>","token":"****"}`,
			want: `{"password":"${DB_PASSWORD}","Authorization":"Bearer ","api_key":"<YOUR_API_KEY>","token":"****"}`,
		},
	})
}
