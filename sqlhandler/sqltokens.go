package sqlhandler

import (
	"slices"
	"strings"
)

// sqlParams returns the parameters the SQL text uses, each once, in the order
// of first use. It reads the text as SQLite's tokenizer does (sqlite3GetToken
// in tokenize.c), across every statement: ?, ?NNN, and :AAAA, @AAAA, #AAAA and
// $AAAA, where AAAA may contain "::" and end in a "(...)" suffix. Literals,
// quoted identifiers and comments hold no parameters; a NUL ends the text, as
// it does for the C library.
func sqlParams(sql string) []string {
	if i := strings.IndexByte(sql, 0); i >= 0 {
		sql = sql[:i]
	}
	var params []string
	for len(sql) > 0 {
		n, isParam := sqlToken(sql)
		if isParam && !slices.Contains(params, sql[:n]) {
			params = append(params, sql[:n])
		}
		sql = sql[n:]
	}
	return params
}

// sqlToken returns the length of the token s starts with, at least 1, and
// whether it is a parameter. s is not empty and holds no NUL.
func sqlToken(s string) (n int, isParam bool) {
	at := func(i int) byte { // 0 past the end, like C's terminator
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	switch c := s[0]; {
	case c == '-' && at(1) == '-': // to the end of the line
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			return i, false
		}
		return len(s), false
	case c == '/' && at(1) == '*' && at(2) != 0: // to "*/" or the end; "/*/" is open
		if i := strings.Index(s[2:], "*/"); i >= 0 {
			return i + 4, false
		}
		return len(s), false
	case c == '\'' || c == '"' || c == '`': // a doubled quote is part of the text
		for i := 1; i < len(s); i++ {
			if s[i] == c {
				if at(i+1) != c {
					return i + 1, false
				}
				i++
			}
		}
		return len(s), false
	case c == '[': // no escapes: ends at the first ]
		if i := strings.IndexByte(s, ']'); i >= 0 {
			return i + 1, false
		}
		return len(s), false
	case (c == 'x' || c == 'X') && at(1) == '\'': // blob: ends at the next '
		if i := strings.IndexByte(s[2:], '\''); i >= 0 {
			return i + 3, false
		}
		return len(s), false
	case c == 0xEF && at(1) == 0xBB && at(2) == 0xBF: // a BOM is space, not an identifier
		return 3, false
	case isDigit(c) || c == '.' && isDigit(at(1)):
		return numberLen(s), false
	case c == '?':
		i := 1
		for isDigit(at(i)) {
			i++
		}
		return i, true
	case c == ':' || c == '@' || c == '#' || c == '$':
		return variableLen(s)
	case isIDChar(c): // identifier or keyword, which may hold $
		i := 1
		for isIDChar(at(i)) {
			i++
		}
		return i, false
	}
	return 1, false
}

// variableLen reads a :, @, # or $ parameter as the CC_VARALPHA and CC_DOLLAR
// cases of sqlite3GetToken do, Tcl variable forms included. A prefix with no
// name after it, or an unclosed "(", makes an illegal token, not a parameter.
func variableLen(s string) (n int, isParam bool) {
	named := 0
	i := 1
loop:
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case isIDChar(c):
			named++
		case c == '(' && named > 0:
			i++
			for i < len(s) && !isSQLSpace(s[i]) && s[i] != ')' {
				i++
			}
			if i == len(s) || s[i] != ')' {
				return i, false // unclosed: an illegal token
			}
			i++
			break loop
		case c == ':' && i+1 < len(s) && s[i+1] == ':':
			i++
		default:
			break loop
		}
	}
	return i, named > 0
}

// numberLen reads a number as the CC_DIGIT case of sqlite3GetToken does: it
// matters because the letters, digits and $ that follow one are part of it,
// so "1.$x" is one illegal token, not a parameter.
func numberLen(s string) int {
	at := func(i int) byte {
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	digits := func(i int, is func(byte) bool) int {
		for is(at(i)) || at(i) == '_' { // _ separates digits: 1_000
			i++
		}
		return i
	}
	var i int
	if s[0] == '0' && (at(1) == 'x' || at(1) == 'X') && isHexDigit(at(2)) {
		i = digits(3, isHexDigit)
	} else {
		i = digits(0, isDigit)
		if at(i) == '.' {
			i = digits(i+1, isDigit)
		}
		if (at(i) == 'e' || at(i) == 'E') && (isDigit(at(i+1)) || (at(i+1) == '+' || at(i+1) == '-') && isDigit(at(i+2))) {
			i = digits(i+2, isDigit)
		}
	}
	for isIDChar(at(i)) {
		i++
	}
	return i
}

// isIDChar is SQLite's IdChar: ASCII letters and digits, _, $ and every byte
// of a multi-byte UTF-8 character.
func isIDChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '_' || c == '$' || c >= 0x80
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHexDigit(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// isSQLSpace is sqlite3Isspace: \t, \n, \v, \f, \r and space.
func isSQLSpace(c byte) bool { return c == ' ' || '\t' <= c && c <= '\r' }

// sqlStatements splits SQL text into its statements at the semicolons the
// tokenizer sees (not those in literals, identifiers or comments), dropping
// the ones with nothing but space and comments. A CREATE TRIGGER body, whose
// statements end in semicolons too, is split wrongly: Apply has no use for
// one.
func sqlStatements(sql string) []string {
	if i := strings.IndexByte(sql, 0); i >= 0 {
		sql = sql[:i]
	}
	var out []string
	start, code := 0, false
	for i := 0; i < len(sql); {
		n, _ := sqlToken(sql[i:])
		switch tok := sql[i : i+n]; {
		case tok == ";":
			if code {
				out = append(out, strings.TrimSpace(sql[start:i]))
			}
			start, code = i+1, false
		case !isSQLSpace(tok[0]) && !strings.HasPrefix(tok, "--") && !strings.HasPrefix(tok, "/*"):
			code = true
		}
		i += n
	}
	if code {
		out = append(out, strings.TrimSpace(sql[start:]))
	}
	return out
}
