package console

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// The roles of the console's users: a viewer reads, an operator also acts.
const (
	RoleViewer   = "viewer"
	RoleOperator = "operator"
)

// ErrInvalidUsers: the users file is not what LoadUsers takes.
var ErrInvalidUsers = errors.New("console: invalid users file")

// Users are who may sign in: a name, a role and a secret (a password or a
// token) each.
type Users struct {
	byName map[string]user
}

type user struct {
	name, role string
	// sum is the secret's SHA-256: a file may give it as sha256:<hex>, so
	// that it holds no secret itself.
	sum [32]byte
}

// LoadUsers reads a users file: one user per line, "name role secret",
// role viewer or operator, secret the password or token itself or
// sha256:<hex of its SHA-256>; blank lines and lines starting with # are
// skipped. The file must not be readable by others.
func LoadUsers(path string) (*Users, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("console: the users file: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o004 != 0 {
		return nil, fmt.Errorf("%w: %s is readable by every user of this host (mode %v): chmod o-r it", ErrInvalidUsers, path, fi.Mode().Perm())
	}
	u, err := ParseUsers(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return u, nil
}

// ParseUsers reads users as LoadUsers does, from r.
func ParseUsers(r io.Reader) (*Users, error) {
	u := &Users{byName: map[string]user{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: line %d has %d fields: want name role secret", ErrInvalidUsers, n, len(f))
		}
		if f[1] != RoleViewer && f[1] != RoleOperator {
			return nil, fmt.Errorf("%w: line %d: role %q: want viewer or operator", ErrInvalidUsers, n, f[1])
		}
		if _, dup := u.byName[f[0]]; dup {
			return nil, fmt.Errorf("%w: line %d: %s is named twice", ErrInvalidUsers, n, f[0])
		}
		us := user{name: f[0], role: f[1], sum: sha256.Sum256([]byte(f[2]))}
		if h, ok := strings.CutPrefix(f[2], "sha256:"); ok {
			b, err := hex.DecodeString(h)
			if err != nil || len(b) != 32 {
				return nil, fmt.Errorf("%w: line %d: sha256: wants 64 hex digits", ErrInvalidUsers, n)
			}
			copy(us.sum[:], b)
		}
		u.byName[f[0]] = us
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(u.byName) == 0 {
		return nil, fmt.Errorf("%w: it names no user", ErrInvalidUsers)
	}
	return u, nil
}

// check is the role of name signing in with secret; "" when they do not match.
func (u *Users) check(name, secret string) string {
	us, ok := u.byName[name]
	sum := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(sum[:], us.sum[:]) != 1 || !ok {
		return ""
	}
	return us.role
}

// session is a signed-in user's: the form token (CSRF) its forms carry.
type session struct {
	Name, Role, Token string
	expires           time.Time
}

// sessions are the console's, in memory: a restart signs everyone out.
type sessions struct {
	mu   sync.Mutex
	open bool // no sign-in: every visitor gets an operator's session
	by   map[string]*session
}

func newSessions(open bool) *sessions { return &sessions{open: open, by: map[string]*session{}} }

const cookieName = "jetledger_console"

func randomHex() string {
	var b [24]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand does not fail
	return hex.EncodeToString(b[:])
}

func (s *sessions) add(name, role string) (id string, se *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for k, v := range s.by {
		if now.After(v.expires) {
			delete(s.by, k)
		}
	}
	id, se = randomHex(), &session{Name: name, Role: role, Token: randomHex(), expires: now.Add(SessionTTL)}
	s.by[id] = se
	return id, se
}

func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.by[id]
	if se == nil || time.Now().After(se.expires) {
		return nil
	}
	return se
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.by, id)
}

func (h *Handler) setCookie(w http.ResponseWriter, id string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: h.prefix + "/", HttpOnly: true,
		Secure: h.opts.Secure, SameSite: http.SameSiteStrictMode, MaxAge: maxAge})
}

type sessionKey struct{}

// signed serves next to a signed-in visitor, and sends others to sign in;
// a POST must carry the session's form token.
func (h *Handler) signed(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var se *session
		if c, err := r.Cookie(cookieName); err == nil {
			se = h.sess.get(c.Value)
		}
		if se == nil && h.sess.open {
			var id string
			id, se = h.sess.add(Anonymous, RoleOperator)
			h.setCookie(w, id, int(SessionTTL.Seconds()))
		}
		if se == nil {
			if r.Method != http.MethodGet || r.Header.Get("X-Console-Fragment") != "" {
				// A page's own update gets no sign-in page to put in its
				// main: console.js reloads, and the page then signs in.
				http.Error(w, "sign in first", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, h.prefix+"/signin", http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost && !h.parseForm(w, r) {
			return
		}
		if r.Method == http.MethodPost && subtle.ConstantTimeCompare([]byte(r.PostFormValue("token")), []byte(se.Token)) != 1 {
			http.Error(w, "the form's token is not this session's: load the page again", http.StatusForbidden)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, se)))
	}
}

// MaxForm bounds a form's body: an action's 20 000 ids take 540 KB.
const MaxForm = 4 << 20

// parseForm reads a POST's form, MaxForm at the most; one it cannot read
// is answered, saying why (413 too large, 400 malformed).
func (h *Handler) parseForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, MaxForm)
	err := r.ParseForm()
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &tooBig):
		http.Error(w, fmt.Sprintf("the form is over %d bytes: nothing done", MaxForm), http.StatusRequestEntityTooLarge)
	default:
		http.Error(w, "the form cannot be read ("+err.Error()+"): nothing done", http.StatusBadRequest)
	}
	return false
}

func sessionOf(r *http.Request) *session {
	se, _ := r.Context().Value(sessionKey{}).(*session)
	return se
}

// operator serves next to an operator only: the server refuses a
// viewer's action whether or not a page offered it.
func (h *Handler) operator(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if se := sessionOf(r); se.Role != RoleOperator {
			h.log.Warn("console: an action refused: the user is no operator", "who", se.Name, "path", r.URL.Path, "from", r.RemoteAddr)
			http.Error(w, "only an operator acts: you are signed in as a viewer", http.StatusForbidden)
			return
		}
		next(w, r)
	}
}

func (h *Handler) signInPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, "signin", nil, map[string]any{"Open": h.sess.open})
}

// Sign-in attempts: after SignInFailures refusals from one address within
// SignInWindow, its next attempts are refused (429) until the window
// passes, right secret or not.
const (
	SignInFailures = 5
	SignInWindow   = 5 * time.Minute
)

// failures counts refused sign-ins per client address.
type failures struct {
	mu sync.Mutex
	by map[string][]time.Time
}

// blocked says whether from has failed too often lately; fail records a
// refusal.
func (f *failures) blocked(from string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	recent := f.by[from][:0]
	for _, t := range f.by[from] {
		if now.Sub(t) < SignInWindow {
			recent = append(recent, t)
		}
	}
	if len(recent) == 0 {
		delete(f.by, from)
	} else {
		f.by[from] = recent
	}
	return len(recent) >= SignInFailures
}

func (f *failures) fail(from string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil {
		f.by = map[string][]time.Time{}
	}
	f.by[from] = append(f.by[from], now)
}

func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	if h.sess.open {
		http.Redirect(w, r, h.prefix+"/", http.StatusSeeOther)
		return
	}
	from, _, _ := strings.Cut(r.RemoteAddr, ":")
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		from = host
	}
	if h.failed.blocked(from, time.Now()) {
		h.log.Warn("console: a sign-in refused: too many failures from this address", "from", from)
		http.Error(w, fmt.Sprintf("too many failed sign-ins from %s: try again in %s", from, SignInWindow), http.StatusTooManyRequests)
		return
	}
	name := r.PostFormValue("name")
	role := h.opts.Users.check(name, r.PostFormValue("secret"))
	if role == "" {
		h.failed.fail(from, time.Now())
		h.log.Warn("console: a sign-in refused", "name", name, "from", r.RemoteAddr)
		w.WriteHeader(http.StatusUnauthorized)
		h.render(w, r, "signin", nil, map[string]any{"Failed": true})
		return
	}
	id, _ := h.sess.add(name, role)
	h.setCookie(w, id, int(SessionTTL.Seconds()))
	h.log.Info("console: signed in", "name", name, "role", role, "from", r.RemoteAddr)
	http.Redirect(w, r, h.prefix+"/", http.StatusSeeOther)
}

func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		h.sess.drop(c.Value)
	}
	h.setCookie(w, "", -1)
	http.Redirect(w, r, h.prefix+"/signin", http.StatusSeeOther)
}
