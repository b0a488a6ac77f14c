package oauth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
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

// The pages people see: sign-in, consent, setting a password from an
// invite, and errors. Plain HTML with no script, style sheet, image or font,
// under a Content-Security-Policy that allows nothing else; never framed;
// every form carries a CSRF token that must match a cookie of this site
// (and, for the consent, the nonce the sign-in gave this browser).

const (
	csrfCookie    = "outreach_csrf"
	consentCookie = "outreach_consent"
)

var pages = pagekit.Pages("oauth", `{{define "login"}}{{template "top" .}}
<p><strong>{{.Client}}</strong> asks to use Outreach for you. Sign in to see what it asks for.</p>
{{with .Upstream}}<p><a href="{{.URL}}">Sign in with {{.Name}}</a></p><p>Or with your Outreach password:</p>{{end}}
<form method="post" action="{{.Action}}">
<input type="hidden" name="id" value="{{.ID}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
{{template "credentials" .}}
<p><button type="submit">Sign in</button></p>
</form>{{template "bottom" .}}{{end}}
{{define "consent"}}{{template "top" .}}
<p>Signed in as <strong>{{.Email}}</strong>.</p>
<p><strong>{{.Client}}</strong> (client <code>{{.ClientID}}</code>) asks to act for you in Outreach, as its own agent; what it does is recorded under your name.</p>
<h2>It would get</h2>
<ul>{{range .Granted}}<li><strong>{{.Name}}</strong>: {{.Meaning}}</li>{{end}}</ul>
{{if .Refused}}<h2>Asked for, not given (your role does not allow it)</h2><ul>{{range .Refused}}<li><strong>{{.Name}}</strong>: {{.Meaning}}</li>{{end}}</ul>{{end}}
<p>After you answer, your browser goes to <code>{{.Redirect}}</code>.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="id" value="{{.ID}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
<p><button type="submit" name="decision" value="approve">Approve</button> <button type="submit" name="decision" value="deny">Deny</button></p>
</form>{{template "bottom" .}}{{end}}
{{define "invite"}}{{template "top" .}}
<p>Set the password you will sign in to Outreach with, as <strong>{{.Email}}</strong>: at least {{.Min}} characters.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="token" value="{{.Token}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
<p><label for="password">New password</label><br><input id="password" name="password" type="password" autocomplete="new-password" minlength="{{.Min}}" required></p>
<p><label for="confirm">The same again</label><br><input id="confirm" name="confirm" type="password" autocomplete="new-password" minlength="{{.Min}}" required></p>
<p><button type="submit">Set password</button></p>
</form>{{template "bottom" .}}{{end}}
`)

// scopeMeaning says what each scope lets a client do, on the consent page.
var scopeMeaning = map[string]string{
	repo.ScopeRead:  "read every record: outlets, contacts, pipeline, coverage, notes, emails, the change log",
	repo.ScopeWrite: "create, change, archive and roll back records",
	repo.ScopeAdmin: "manage agent keys, users and settings",
}

type scopeLine struct{ Name, Meaning string }

func scopeLines(scopes []string) []scopeLine {
	out := []scopeLine{}
	for _, s := range scopes {
		out = append(out, scopeLine{s, scopeMeaning[s]})
	}
	return out
}

func (s *Server) render(w http.ResponseWriter, code int, name, formAction string, data map[string]any) {
	if err := pagekit.Render(w, pages, code, name, formAction, data); err != nil {
		s.log.Error().Err(err).Str("page", name).Msg("oauth page")
	}
}

func (s *Server) message(w http.ResponseWriter, code int, title, msg string) {
	s.render(w, code, "message", "'none'", map[string]any{"Title": title, "Message": msg})
}

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Server) secure() bool { return strings.HasPrefix(s.cfg.PublicURL, "https://") }

func (s *Server) setCookie(w http.ResponseWriter, name, value string) {
	u, _ := url.Parse(s.cfg.PublicURL)
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: u.Path + "/oauth/", HttpOnly: true, Secure: s.secure(),
		SameSite: http.SameSiteStrictMode, MaxAge: int(access.OAuthRequestTTL.Seconds())})
}

// csrfToken returns this browser's CSRF token, made (and set as a cookie)
// when it has none.
func (s *Server) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	v := random()
	s.setCookie(w, csrfCookie, v)
	return v
}

// sameToken: the form's token is present and equals the cookie's.
func sameToken(r *http.Request, cookie string) bool {
	c, err := r.Cookie(cookie)
	form := r.PostFormValue("csrf")
	return err == nil && form != "" && subtle.ConstantTimeCompare([]byte(c.Value), []byte(form)) == 1
}

func (s *Server) action(path string) string { return s.cfg.PublicURL + path }

// upstreamLink is the sign-in page's link to the upstream provider, or nil.
func (s *Server) upstreamLink(id string) map[string]string {
	if s.up == nil {
		return nil
	}
	return map[string]string{"URL": s.action(PathUpstream) + "?id=" + url.QueryEscape(id), "Name": s.up.cfg.Name}
}

// login shows the sign-in form of an authorization request and checks it.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	switch r.Method {
	case http.MethodGet:
		ar, err := access.Of(s.store).OAuthRequestByID(ctx, r.URL.Query().Get("id"))
		if err != nil {
			s.message(w, http.StatusNotFound, "Sign-in expired", "This sign-in link is unknown or has expired. Start again from your assistant.")
			return
		}
		s.render(w, http.StatusOK, "login", "'self'", map[string]any{"Title": "Sign in", "Client": ar.ClientName, "ID": ar.ID,
			"CSRF": s.csrfToken(w, r), "Action": s.action(PathLogin), "Upstream": s.upstreamLink(ar.ID)})
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		if !sameToken(r, csrfCookie) {
			s.message(w, http.StatusForbidden, "Form refused", "The form's security token is missing or does not match this browser. Reload the sign-in page and try again.")
			return
		}
		ar, err := access.Of(s.store).OAuthRequestByID(ctx, r.PostFormValue("id"))
		if err != nil {
			s.message(w, http.StatusNotFound, "Sign-in expired", "This sign-in has expired. Start again from your assistant.")
			return
		}
		email := strings.ToLower(strings.TrimSpace(r.PostFormValue("email")))
		again := func(code int, msg string) {
			s.render(w, code, "login", "'self'", map[string]any{"Title": "Sign in", "Client": ar.ClientName, "ID": ar.ID, "Email": email,
				"CSRF": s.csrfToken(w, r), "Action": s.action(PathLogin), "Error": msg, "Upstream": s.upstreamLink(ar.ID)})
		}
		if until, locked := s.signins.locked(email, clientIP(r)); locked {
			again(http.StatusTooManyRequests, fmt.Sprintf("Too many failed sign-ins. Try again after %s UTC.", until.UTC().Format("15:04")))
			return
		}
		si, err := access.Of(s.store).CheckPassword(ctx, email, r.PostFormValue("password"))
		if errors.Is(err, access.ErrBadPassword) {
			s.signins.fail(email, clientIP(r))
			again(http.StatusUnauthorized, "The email or the password is wrong.")
			return
		}
		if err != nil {
			s.log.Error().Err(err).Msg("oauth sign-in")
			again(http.StatusInternalServerError, "The sign-in could not be checked. Try again.")
			return
		}
		s.signins.succeed(email)
		s.signedIn(w, r, ar, si.ID, si.Email, si.Scopes)
	default:
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
	}
}

// signedIn records who signed in for an authorization request, gives this
// browser the consent nonce, and shows the consent page: the client, the
// scopes it would get (as far as allowed, the member's role) and those it
// would not, and the redirect.
func (s *Server) signedIn(w http.ResponseWriter, r *http.Request, ar *access.OAuthRequest, userID, email string, allowed []string) {
	nonce := random()
	ar, err := access.Of(s.store).UpdateOAuthRequest(actor(r.Context(), "sign-in"), ar.ID, func(x *access.OAuthRequest) error {
		x.UserID, x.ConsentHash, x.UpstreamHash, x.Allowed = userID, access.HashSecret(nonce), "", slices.Clone(allowed)
		return nil
	})
	if err != nil {
		s.message(w, http.StatusConflict, "Sign-in expired", "This sign-in has expired. Start again from your assistant.")
		return
	}
	s.setCookie(w, consentCookie, nonce)
	granted, refused := splitScopes(ar.Scopes, allowed)
	s.render(w, http.StatusOK, "consent", "'self' "+redirectSource(ar.RedirectURI), map[string]any{"Title": "Allow " + ar.ClientName + "?",
		"Client": ar.ClientName, "ClientID": ar.ClientID, "Email": email, "Granted": scopeLines(granted), "Refused": scopeLines(refused),
		"Redirect": ar.RedirectURI, "ID": ar.ID, "CSRF": nonce, "Action": s.action(PathConsent)})
}

// splitScopes divides the scopes asked into those the member's role allows
// and those it does not.
func splitScopes(asked, allowed []string) (granted, refused []string) {
	for _, sc := range asked {
		if slices.Contains(allowed, sc) {
			granted = append(granted, sc)
		} else {
			refused = append(refused, sc)
		}
	}
	return granted, refused
}

// redirectSource is the CSP source of a redirect URI, which the consent
// form's answer is redirected to (form-action covers redirects).
func redirectSource(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "'none'"
	}
	if u.Host == "" {
		return u.Scheme + ":"
	}
	return u.Scheme + "://" + u.Host
}

// consent takes the member's answer.
func (s *Server) consent(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST the consent form", http.StatusMethodNotAllowed)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	ctx := r.Context()
	ar, err := access.Of(s.store).OAuthRequestByID(ctx, r.PostFormValue("id"))
	if err != nil {
		s.message(w, http.StatusNotFound, "Request expired", "This authorization request has expired or was answered. Start again from your assistant.")
		return
	}
	if !sameToken(r, consentCookie) || ar.UserID == "" || subtle.ConstantTimeCompare([]byte(access.HashSecret(r.PostFormValue("csrf"))), []byte(ar.ConsentHash)) != 1 {
		s.message(w, http.StatusForbidden, "Form refused", "The form's security token is missing or does not match this browser's sign-in. Sign in again from your assistant.")
		return
	}
	deny := func(desc string) {
		if err := access.Of(s.store).EndOAuthRequest(actor(ctx, "consent"), ar.ID); err != nil {
			s.log.Error().Err(err).Msg("oauth deny")
		}
		u, _ := url.Parse(ar.RedirectURI)
		q := u.Query()
		q.Set("error", "access_denied")
		q.Set("error_description", desc)
		if ar.State != "" {
			q.Set("state", ar.State)
		}
		q.Set("iss", s.cfg.Issuer())
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
	}
	if r.PostFormValue("decision") != "approve" {
		deny("the member denied the request")
		return
	}
	granted, _ := splitScopes(ar.Scopes, ar.Allowed)
	if len(granted) == 0 {
		deny("the member's role allows none of the scopes asked")
		return
	}
	_, err = access.Of(s.store).UpdateOAuthRequest(actor(ctx, "consent"), ar.ID, func(x *access.OAuthRequest) error {
		t := time.Now().UTC()
		x.Scopes, x.ApprovedAt = granted, &t
		return nil
	})
	if err != nil {
		s.message(w, http.StatusConflict, "Request expired", "This authorization request has expired or was answered. Start again from your assistant.")
		return
	}
	http.Redirect(w, r, s.cfg.Issuer()+PathCallback+"?id="+url.QueryEscape(ar.ID), http.StatusSeeOther)
}

// invite lets an invited member set their password.
func (s *Server) invite(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	token := r.URL.Query().Get("token")
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
		token = r.PostFormValue("token")
	}
	si, err := access.Of(s.store).InviteFor(ctx, token)
	if err != nil {
		s.message(w, http.StatusNotFound, "Invite not valid", "This invite link is unknown, used or expired. Ask an admin for a new one.")
		return
	}
	page := func(code int, msg string) {
		s.render(w, code, "invite", "'self'", map[string]any{"Title": "Set your password", "Email": si.Email, "Token": token, "Min": access.MinPassword,
			"CSRF": s.csrfToken(w, r), "Action": s.action(PathInvite), "Error": msg})
	}
	switch r.Method {
	case http.MethodGet:
		page(http.StatusOK, "")
	case http.MethodPost:
		if !sameToken(r, csrfCookie) {
			s.message(w, http.StatusForbidden, "Form refused", "The form's security token is missing or does not match this browser. Open the invite link again.")
			return
		}
		if r.PostFormValue("password") != r.PostFormValue("confirm") {
			page(http.StatusBadRequest, "The two passwords differ.")
			return
		}
		if _, err := access.Of(s.store).AcceptInvite(actor(ctx, "invite"), token, r.PostFormValue("password")); err != nil {
			var e *repo.Error
			if errors.As(err, &e) {
				page(http.StatusBadRequest, e.Message)
				return
			}
			s.log.Error().Err(err).Msg("oauth invite")
			page(http.StatusInternalServerError, "The password could not be set. Try again.")
			return
		}
		s.message(w, http.StatusOK, "Password set", "Your password is set. Add Outreach to your assistant and sign in there.")
	default:
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
	}
}

func clientIP(r *http.Request) string {
	host := r.RemoteAddr
	if i := strings.LastIndexByte(host, ':'); i > 0 {
		host = host[:i]
	}
	return host
}

// attempts counts failed sign-ins: an email with MaxFailures failures in
// FailureWindow is locked for the rest of the window, and an address with
// ten times as many is too. The count is this process's (a restart clears
// it).
type attempts struct {
	mu       sync.Mutex
	failures map[string][]time.Time
}

// Sign-in lockout.
const (
	MaxFailures   = 5
	FailureWindow = 15 * time.Minute
)

func newAttempts() *attempts { return &attempts{failures: map[string][]time.Time{}} }

func (a *attempts) recent(key string, t time.Time) []time.Time {
	f := slices.DeleteFunc(a.failures[key], func(x time.Time) bool { return t.Sub(x) >= FailureWindow })
	if len(f) == 0 {
		delete(a.failures, key)
		return nil
	}
	a.failures[key] = f
	return f
}

func (a *attempts) locked(email, ip string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := time.Now()
	if f := a.recent("email:"+email, t); len(f) >= MaxFailures {
		return f[0].Add(FailureWindow), true
	}
	if f := a.recent("ip:"+ip, t); len(f) >= 10*MaxFailures {
		return f[0].Add(FailureWindow), true
	}
	return time.Time{}, false
}

func (a *attempts) fail(email, ip string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.failures) > 100000 {
		a.failures = map[string][]time.Time{}
	}
	t := time.Now()
	a.failures["email:"+email] = append(a.failures["email:"+email], t)
	a.failures["ip:"+ip] = append(a.failures["ip:"+ip], t)
}

func (a *attempts) succeed(email string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.failures, "email:"+email)
}
