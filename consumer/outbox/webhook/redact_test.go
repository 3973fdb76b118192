package webhook

import "testing"

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                                   "",
		"https://hooks.example/a/b":          "https://hooks.example/a/b",
		"https://user:hookpw@h.example/hook": "https://REDACTED@h.example/hook",
		"https://token@h.example/hook":       "https://REDACTED@h.example/hook",
		"http://u:p@h/hook/T000/B000?token=querysecret&x=1#frag": "http://REDACTED@h/hook/T000/B000?token=REDACTED&x=REDACTED#frag",
		"https://h/items/{key}?sig=s3cret":                       "https://h/items/{key}?sig=REDACTED",
		"https://h/items/{external_id}":                          "https://h/items/{external_id}",
		"http://[::1]:8080/x?a=b":                                "http://[::1]:8080/x?a=REDACTED",
		"http://u:p@h?x=y@z":                                     "http://REDACTED@h?x=REDACTED",
		"https://h/hook?S3CRETKEY":                               "https://h/hook?REDACTED",
		"https://h/hook?a=1&S3CRET":                              "https://h/hook?REDACTED",
		"u:pw@h/x":                                               "REDACTED",
		"://bad":                                                 "REDACTED",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
