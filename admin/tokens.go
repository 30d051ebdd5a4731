package admin

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

const (
	// ReadTokenFileName is the read-only token's file in the data
	// folder.
	ReadTokenFileName = "admin-read-token"
	// ReadTokenPrefix marks a generated read-only token, as TokenPrefix
	// marks the admin token.
	ReadTokenPrefix = "spadmr_"
)

// TokenSource is where one admin token comes from: Env (the value of
// the environment variable EnvName) when set, else the file File,
// created with a random token starting with Prefix when it does not
// exist. Setting and EnvName name the source in errors, never the token.
type TokenSource struct {
	Env     string
	File    string
	Prefix  string
	Setting string // "admin_token_file"
	EnvName string // "SURGEPAY_ADMIN_TOKEN"
	// What names the token for the operator: "admin token".
	What string
}

// AdminTokenSource is the admin token's source: env
// (SURGEPAY_ADMIN_TOKEN) when set, else file (admin_token_file).
func AdminTokenSource(env, file string) TokenSource {
	return TokenSource{Env: env, File: file, Prefix: TokenPrefix, Setting: "admin_token_file",
		EnvName: "SURGEPAY_ADMIN_TOKEN", What: "admin token"}
}

// ReadTokenSource is the read-only token's source: env
// (SURGEPAY_ADMIN_READ_TOKEN) when set, else file
// (admin_read_token_file).
func ReadTokenSource(env, file string) TokenSource {
	return TokenSource{Env: env, File: file, Prefix: ReadTokenPrefix, Setting: "admin_read_token_file",
		EnvName: "SURGEPAY_ADMIN_READ_TOKEN", What: "read-only token"}
}

// Load returns the token: s.Env when set, else the content of s.File,
// which is created (mode 0600, tokenBytes random bytes after s.Prefix)
// when it does not exist (created is then true). A file that the group
// or others can read or write is refused, as ssh refuses a private key:
// the token would no longer be secret.
func (s TokenSource) Load() (token string, created bool, err error) {
	if s.Env != "" {
		return s.Env, false, nil
	}
	token, err = s.read()
	if !errors.Is(err, fs.ErrNotExist) {
		return token, false, err
	}
	b := make([]byte, tokenBytes)
	rand.Read(b) // never fails (crypto/rand)
	token = s.Prefix + base64.RawURLEncoding.EncodeToString(b)
	// O_EXCL: when serve and settle start at once, one creates the file
	// and the other reads it.
	f, err := os.OpenFile(s.File, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // G304: the operator names the file (admin_token_file)
	if errors.Is(err, fs.ErrExist) {
		token, err = s.read()
		return token, false, err
	}
	if err != nil {
		return "", false, fmt.Errorf("%s %s: %w", s.Setting, s.File, err)
	}
	_, err = f.WriteString(token + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(s.File) // best effort: the write's error is the one to report
		return "", false, fmt.Errorf("%s %s: %w", s.Setting, s.File, err)
	}
	return token, true, nil
}

// read reads the token file, checking its mode and length; an error
// wraps fs.ErrNotExist when there is no file.
func (s TokenSource) read() (string, error) {
	f, err := os.Open(s.File) //nolint:gosec // G304: the operator names the file (admin_token_file)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", s.Setting, s.File, err)
	}
	defer f.Close() //nolint:errcheck // read-only: closing loses nothing
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", s.Setting, s.File, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s %s: mode %v lets others read it; chmod 600 it (or set %s)",
			s.Setting, s.File, st.Mode().Perm(), s.EnvName)
	}
	b := make([]byte, TokenLenMax+2)
	n, _ := f.Read(b)
	token := strings.TrimSpace(string(b[:n]))
	if len(token) < TokenLenMin || len(token) > TokenLenMax {
		return "", fmt.Errorf("%s %s: the token is %d characters; it must be %d to %d (delete the file to have a new one made)",
			s.Setting, s.File, len(token), TokenLenMin, TokenLenMax)
	}
	return token, nil
}

// where tells the operator where the token is, never the token.
func (s TokenSource) where(created bool) string {
	switch {
	case s.Env != "":
		return s.EnvName
	case created:
		return "the file " + s.File + ", just created"
	}
	return "the file " + s.File
}

// Credentials are the admin listener's two tokens: the admin token,
// which may do everything, and the read-only token, which may read
// (GET) everything and change nothing. Both are read at start and again
// by Reload. Safe for concurrent use: a reload swaps the tokens at once.
// A nil *Credentials holds no token.
type Credentials struct {
	full, read               TokenSource
	fullCreated, readCreated bool
	token, readToken         atomic.Pointer[string]
	mu                       sync.Mutex // serialises Reload
}

// LoadCredentials loads (or creates) both tokens. The two must differ:
// a token that is both would be read-only and not.
func LoadCredentials(full, read TokenSource) (*Credentials, error) {
	c := &Credentials{full: full, read: read}
	token, readToken, err := c.load(&c.fullCreated, &c.readCreated)
	if err != nil {
		return nil, err
	}
	c.token.Store(&token)
	c.readToken.Store(&readToken)
	return c, nil
}

func (c *Credentials) load(fullCreated, readCreated *bool) (token, readToken string, err error) {
	if token, *fullCreated, err = c.full.Load(); err != nil {
		return "", "", err
	}
	if readToken, *readCreated, err = c.read.Load(); err != nil {
		return "", "", err
	}
	if token == readToken {
		return "", "", fmt.Errorf("%s and %s hold the same token: the read-only token must be another (delete %s to have one made)",
			c.full.where(false), c.read.where(false), c.read.Setting)
	}
	return token, readToken, nil
}

// Token returns the admin token; "" for a nil c.
func (c *Credentials) Token() string {
	if c == nil {
		return ""
	}
	return loadString(&c.token)
}

// ReadToken returns the read-only token; "" for a nil c.
func (c *Credentials) ReadToken() string {
	if c == nil {
		return ""
	}
	return loadString(&c.readToken)
}

func loadString(p *atomic.Pointer[string]) string {
	if t := p.Load(); t != nil {
		return *t
	}
	return ""
}

// Reload reads both tokens again (SIGHUP). It returns what changed
// ("admin token", "read-only token"): the new token is required at once
// and ends the sessions of its logins. On error (a file that does not
// load, the two the same) both running tokens stay. A nil c does
// nothing.
func (c *Credentials) Reload() (changed []string, err error) {
	if c == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var fullCreated, readCreated bool
	token, readToken, err := c.load(&fullCreated, &readCreated)
	if err != nil {
		return nil, err
	}
	if token != c.Token() {
		c.token.Store(&token)
		changed = append(changed, c.full.What)
	}
	if readToken != c.ReadToken() {
		c.readToken.Store(&readToken)
		changed = append(changed, c.read.What)
	}
	return changed, nil
}

// Announce prints where the dashboard is (base: "http://127.0.0.1:9090")
// and where the tokens are, never the tokens.
func (c *Credentials) Announce(w io.Writer, base string) {
	fmt.Fprintf(w, "Admin dashboard: %s/dashboard (log in with the admin token in %s)\n", base, c.full.where(c.fullCreated))
	fmt.Fprintf(w, "Read-only operators (search, no actions): log in with the read-only token in %s\n", c.read.where(c.readCreated))
}
