package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://user:pass@host:6443/x?token=abc", "https://redacted@host:6443/x"},
		{"https://user@host", "https://redacted@host"},
		{"https://u:***@h/version", "https://redacted@h/version"},
		{"https://host:6443/api/v1/pods?limit=500#frag", "https://host:6443/api/v1/pods"},
		{"https://host/?", "https://host/"},
		{"https://host:6443", "https://host:6443"},
		{"http://10.0.0.1:8080/prefix", "http://10.0.0.1:8080/prefix"},
		{"https://user:pass@host:%zz/", "<unparsable URL>"},
		{"https://user:pa\nss@host/", "<unparsable URL>"},
		{"://user:pass@host", "<unparsable URL>"},
		{"", ""},
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSafeTextURLs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{
			`Get "https://u:p@h/version": dial tcp 10.0.0.1:443: connect: connection refused`,
			`Get "https://redacted@h/version": dial tcp 10.0.0.1:443: connect: connection refused`,
		},
		{
			"server https://user:pass@host:6443/x?token=abc said no; retry at http://other/#t=1.",
			"server https://redacted@host:6443/x said no; retry at http://other/",
		},
		{
			"<https://h/x?access_token=abc> and 'wss://u:p@h/watch?x=1'",
			"<https://h/x> and 'wss://redacted@h/watch'",
		},
		{
			// A control character inside the URL ends it: what comes before cannot parse.
			"https://user:pa\x1bss@host/",
			`<unparsable URL>\x1bss@host/`,
		},
		{"no URL: host:6443, a:b@c", "no URL: host:6443, a:b@c"},
	} {
		if got := SafeText(tc.in, 1000); got != tc.want {
			t.Errorf("SafeText(%q) =\n%q\nwant\n%q", tc.in, got, tc.want)
		}
	}
}

// TestSafeTextHTTPError: the error of a real request through a URL with userinfo.
func TestSafeTextHTTPError(t *testing.T) {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
		},
	}}
	_, err := client.Get("https://alice:s3cret@member.example/version?token=t0ken")
	if err == nil {
		t.Fatal("no error")
	}
	got := SafeText(err.Error(), MaxErrorText)
	want := `Get "https://redacted@member.example/version": dial tcp 10.0.0.1:443: connect: connection refused`
	if got != want {
		t.Errorf("SafeText(%q) =\n%q\nwant\n%q", err, got, want)
	}
}

func TestSafeTextEscapes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"\x1b[31mred\x1b[0m\nnext line", `\x1b[31mred\x1b[0m\nnext line`},
		{"a\r\n\tb\x00c\x7fd", `a\r\n\tb\x00c\x7fd`},
		{"bad \xff\xfe utf-8", `bad \xff\xfe utf-8`},
		{"bidi \u202eevil\u202c, C1 \u0085, line sep \u2028", `bidi \u202eevil\u202c, C1 \u0085, line sep \u2028`},
		{"kept: é, 日本, 🙂, a\\nb", "kept: é, 日本, 🙂, a\\nb"},
	} {
		got := SafeText(tc.in, 1000)
		if got != tc.want {
			t.Errorf("SafeText(%q) =\n%q\nwant\n%q", tc.in, got, tc.want)
		}
		if strings.ContainsAny(got, "\n\r\x1b\x00") || !utf8.ValidString(got) {
			t.Errorf("SafeText(%q) = %q: a raw control character or invalid UTF-8", tc.in, got)
		}
	}
}

func TestSafeTextTruncates(t *testing.T) {
	// 20 KiB of two-byte runes: cut on a rune boundary, the rest counted.
	long := strings.Repeat("é", 10*1024)
	got := SafeText(long, 513)
	want := strings.Repeat("é", 256) + "... (19968 bytes more)"
	if got != want {
		t.Errorf("SafeText(20 KiB, 513) = %q...%q, want %q", got[:8], got[len(got)-30:], want[len(want)-30:])
	}

	// Escapes count as what they are shown as.
	if got, want := SafeText("\n\n\n", 4), `\n\n... (2 bytes more)`; got != want {
		t.Errorf("SafeText = %q, want %q", got, want)
	}
	if got, want := SafeText("short", 5), "short"; got != want {
		t.Errorf("SafeText = %q, want %q", got, want)
	}
	if got, want := SafeText("abc", 0), "... (3 bytes more)"; got != want {
		t.Errorf("SafeText = %q, want %q", got, want)
	}
	if got, want := SafeText("abc", -1), "... (3 bytes more)"; got != want {
		t.Errorf("SafeText = %q, want %q", got, want)
	}

	// Redaction comes before the cut: a cut inside a URL shows none of its userinfo.
	text := strings.Repeat("x", 20) + " https://alice:s3cret@host/p?token=t0ken"
	for n := 0; n <= len(text); n++ {
		got := SafeText(text, n)
		if strings.Contains(got, "alice") || strings.Contains(got, "s3c") || strings.Contains(got, "t0k") {
			t.Errorf("SafeText(%q, %d) = %q", text, n, got)
		}
	}
}

func TestSafeError(t *testing.T) {
	if SafeError(nil) != nil {
		t.Errorf("SafeError(nil) != nil")
	}
	inner := fmt.Errorf("list pods: %w", io.ErrUnexpectedEOF)
	err := fmt.Errorf(`Get "https://u:p@h/api": %w; body: %s`, inner, strings.Repeat("\x1b[2J", 20*1024))
	safe := SafeError(err)
	if !errors.Is(safe, io.ErrUnexpectedEOF) {
		t.Errorf("SafeError does not unwrap to the error's cause")
	}
	if !errors.Is(safe, err) {
		t.Errorf("SafeError does not unwrap to the error")
	}
	text := safe.Error()
	if !strings.HasPrefix(text, `Get "https://redacted@h/api": list pods: unexpected EOF; body: \x1b[2J`) {
		t.Errorf("SafeError = %.100q...", text)
	}
	shown, _, ok := strings.Cut(text, "... (")
	if !ok || len(shown) > MaxErrorText || strings.ContainsAny(text, "\x1b\n") {
		t.Errorf("SafeError = %q: not bounded to %d bytes and escaped", text, MaxErrorText)
	}
}
