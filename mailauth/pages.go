package mailauth

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"outreach/internal/pagekit"
	"outreach/repo"
	"outreach/repo/access"
)

// The connect page and the provider's return. Plain HTML with no script,
// style sheet, image or font, under a Content-Security-Policy that allows
// nothing else; never framed; not cached. An admin signs in with their
// Outreach password (or arrives with a one-time link of the command line),
// is sent to the provider, and comes back to the callback, which says
// plainly what happened.

const (
	csrfCookie  = "outreach_mailbox_csrf"
	nonceCookie = "outreach_mailbox_flow"
)

var pages = pagekit.Pages("mailbox", `{{define "signin"}}{{template "top" .}}
<p>Connect the team mailbox <strong>{{.Address}}</strong> at {{.Provider}}: sign in to Outreach as an admin, then at {{.Provider}} as {{.Address}}.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
{{template "credentials" .}}
<p><button type="submit">Sign in and connect</button></p>
</form>{{template "bottom" .}}{{end}}
`)

// Pages serves the connect page and the callback.
type Pages struct {
	m        *Mailbox
	mu       sync.Mutex
	failures map[string][]time.Time
}

// Pages returns the handler of ConnectPath and CallbackPath.
func (m *Mailbox) Pages() *Pages { return &Pages{m: m, failures: map[string][]time.Time{}} }

func (p *Pages) render(w http.ResponseWriter, code int, name, formAction string, data map[string]any) {
	if err := pagekit.Render(w, pages, code, name, formAction, data); err != nil {
		p.m.opts.Log.Error().Err(err).Str("page", name).Msg("mailbox page")
	}
}

func (p *Pages) message(w http.ResponseWriter, code int, title, msg string) {
	p.render(w, code, "message", "'none'", map[string]any{"Title": title, "Message": msg})
}

func (p *Pages) cookie(w http.ResponseWriter, name, value string, maxAge time.Duration) {
	u, _ := url.Parse(p.m.opts.PublicURL)
	// Lax: the provider's redirect back is a top-level navigation from
	// another site, on which a Strict cookie is not sent.
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: strings.TrimRight(u.Path, "/") + "/mailbox/", HttpOnly: true,
		Secure: strings.HasPrefix(p.m.opts.PublicURL, "https://"), SameSite: http.SameSiteLaxMode, MaxAge: int(maxAge.Seconds())})
}

func (p *Pages) action() string { return strings.TrimRight(p.m.opts.PublicURL, "/") + ConnectPath }

// ServeHTTP routes the two paths.
func (p *Pages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasSuffix(r.URL.Path, ConnectPath):
		p.connect(w, r)
	case strings.HasSuffix(r.URL.Path, CallbackPath):
		p.callback(w, r)
	default:
		http.NotFound(w, r)
	}
}

// start sends the browser to the provider for admin userID.
func (p *Pages) start(w http.ResponseWriter, r *http.Request, userID string) {
	u, nonce := p.m.Start(userID)
	p.cookie(w, nonceCookie, nonce, FlowTTL)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, u, http.StatusSeeOther)
}

func (p *Pages) signin(w http.ResponseWriter, code int, csrf, email, msg string) {
	// The form's answer redirects to the provider: a browser holds a
	// redirect after a form to the form-action sources too.
	p.render(w, code, "signin", "'self' "+origin(p.m.opts.Provider.AuthURL), map[string]any{"Title": "Connect the team mailbox", "Address": p.m.opts.Address,
		"Provider": providerName(p.m.opts.Provider.Name), "CSRF": csrf, "Email": email, "Error": msg, "Action": p.action()})
}

// origin is the scheme and host of u, as a CSP source.
func origin(u string) string {
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" {
		return ""
	}
	return pu.Scheme + "://" + pu.Host
}

func providerName(n string) string {
	switch n {
	case Google:
		return "Google"
	case Microsoft:
		return "Microsoft"
	}
	return n
}

func (p *Pages) connect(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		if tok := r.URL.Query().Get("link"); tok != "" {
			userID, err := p.m.UseLink(tok)
			if err != nil {
				p.message(w, http.StatusNotFound, "Link expired", err.Error())
				return
			}
			p.start(w, r, userID)
			return
		}
		csrf := randomToken()
		p.cookie(w, csrfCookie, csrf, FlowTTL)
		p.signin(w, http.StatusOK, csrf, "", "")
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		c, err := r.Cookie(csrfCookie)
		form := r.PostFormValue("csrf")
		if err != nil || form == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(form)) != 1 {
			p.message(w, http.StatusForbidden, "Form refused", "The form's security token is missing or does not match this browser. Reload the connect page and try again.")
			return
		}
		email := strings.ToLower(strings.TrimSpace(r.PostFormValue("email")))
		if p.locked(email) {
			p.signin(w, http.StatusTooManyRequests, c.Value, email, "Too many failed sign-ins for this address. Try again in 15 minutes.")
			return
		}
		si, err := access.Of(p.m.store).CheckPassword(r.Context(), email, r.PostFormValue("password"))
		if errors.Is(err, access.ErrBadPassword) {
			p.fail(email)
			p.signin(w, http.StatusUnauthorized, c.Value, email, "The email or the password is wrong.")
			return
		}
		if err != nil {
			p.m.opts.Log.Error().Err(err).Msg("mailbox connect: sign-in")
			p.signin(w, http.StatusInternalServerError, c.Value, email, "The sign-in could not be checked. Try again.")
			return
		}
		if !slices.Contains(si.Scopes, repo.ScopeAdmin) {
			p.signin(w, http.StatusForbidden, c.Value, email, "Only an admin connects the team mailbox; "+email+" is not one.")
			return
		}
		p.start(w, r, si.ID)
	default:
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
	}
}

func (p *Pages) callback(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "GET", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	nonce := ""
	if c, err := r.Cookie(nonceCookie); err == nil {
		nonce = c.Value
	}
	p.cookie(w, nonceCookie, "", -time.Second)
	if e := q.Get("error"); e != "" {
		// The flow is spent all the same: a state is used once.
		p.m.Finish(r.Context(), q.Get("state"), "", "")
		p.message(w, http.StatusBadRequest, "Not connected", "The provider did not connect the mailbox ("+e+": "+firstLine(q.Get("error_description"))+"). Nothing was changed.")
		return
	}
	c, err := p.m.Finish(r.Context(), q.Get("state"), q.Get("code"), nonce)
	var ref *Refusal
	switch {
	case errors.As(err, &ref):
		p.message(w, http.StatusBadRequest, "Not connected", ref.Message)
	case err != nil:
		p.m.opts.Log.Error().Err(err).Msg("mailbox connect: callback")
		p.message(w, http.StatusInternalServerError, "Not connected", "The connection could not be kept: "+err.Error())
	default:
		p.message(w, http.StatusOK, "Mailbox connected", "The team mailbox "+c.Address+" is connected. The inbox sync and pitch sending use it from now on; you can close this page.")
	}
}

const (
	lockAfter  = 5
	lockWindow = 15 * time.Minute
)

func (p *Pages) recent(email string) []time.Time {
	var out []time.Time
	for _, t := range p.failures[email] {
		if time.Since(t) < lockWindow {
			out = append(out, t)
		}
	}
	p.failures[email] = out
	return out
}

func (p *Pages) locked(email string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.recent(email)) >= lockAfter
}

func (p *Pages) fail(email string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures[email] = append(p.recent(email), time.Now())
}
