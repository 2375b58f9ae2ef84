package fleet

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxErrorText is the most bytes of an error's text SafeError keeps (before its suffix).
const MaxErrorText = 512

// RedactURL returns u with any userinfo replaced by "redacted" and query/fragment dropped; an
// unparsable value becomes "<unparsable URL>".
//
// The query and fragment go whole, not key by key: a member's or tenant's URL may carry a
// token under any name (?token=, ?access_token=, #id_token=).
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		// Not the error's text: it quotes the whole value, userinfo included.
		return "<unparsable URL>"
	}
	if p.User != nil {
		p.User = url.User("redacted")
	}
	p.RawQuery = ""
	p.ForceQuery = false
	p.Fragment = ""
	p.RawFragment = ""
	return p.String()
}

// urlPattern finds what SafeText treats as a URL: a scheme, "://", and everything up to
// whitespace, a control character, a quote or an angle bracket (the characters that end a URL
// in Go's and the API server's error texts: `Get "https://h/x": ...`).
var urlPattern = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^ \\x00-\\x1f\\x7f\"'`<>]*")

// SafeText bounds and escapes text that came from a member's API server or a tenant (error
// messages): every URL in it (scheme://...) passed through RedactURL, control characters and
// invalid UTF-8 escaped (strconv-style, no raw newlines/ESC), truncated to max bytes on a rune
// boundary with a suffix like "... (1234 bytes more)".
//
// The text is redacted and escaped first, then truncated: max bounds what is shown, and the
// suffix counts the escaped bytes left out. Escaped are the characters strconv.IsPrint
// rejects (C0 and C1 controls, DEL, and format characters such as the bidirectional
// overrides, which reorder what a terminal shows), as \n, \t, \x1b, \u202e; a byte that is
// not UTF-8 as \xff. A backslash is kept as it is, so the text stays readable, and an escape
// in the output may also have been typed by the sender. A negative max is 0.
func SafeText(s string, max int) string {
	s = urlPattern.ReplaceAllStringFunc(s, RedactURL)
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+size])
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += size
	}
	out := b.String()
	if max < 0 {
		max = 0
	}
	if len(out) <= max {
		return out
	}
	// Every rune of out is valid UTF-8 now, so backing up to a rune start is enough.
	cut := max
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes more)", out[:cut], len(out)-cut)
}

// SafeError is SafeText(err.Error(), MaxErrorText) as an error that still unwraps to err
// (errors.Is works). A nil err is nil.
func SafeError(err error) error {
	if err == nil {
		return nil
	}
	return &safeError{text: SafeText(err.Error(), MaxErrorText), err: err}
}

type safeError struct {
	text string
	err  error
}

func (e *safeError) Error() string { return e.text }
func (e *safeError) Unwrap() error { return e.err }
