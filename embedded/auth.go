package embedded

// The analyst endpoint's authentication: SCRAM-SHA-256 over MongoDB's SASL
// commands (saslStart, saslContinue), with the server side of the library
// the Go driver itself uses, and a limit on failed attempts.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"golang.org/x/time/rate"
)

// saslStart begins a SCRAM-SHA-256 conversation.
func (c *conn) saslStart(cmd bson.D) bson.D {
	c.conv, c.convUser, c.convWhy, c.convFinal = nil, "", nil, false
	c.user = ""
	if mech, _ := lookup(cmd, "mechanism").(string); mech != "SCRAM-SHA-256" {
		return errorDoc(codeMechanismUnavailable, fmt.Sprintf("outreach: mechanism %q is not offered here; use SCRAM-SHA-256 (authMechanism=SCRAM-SHA-256)", mech))
	}
	if wait, blocked := c.g.fails.blocked("", c.remote); blocked {
		return errorDoc(codeAuthenticationFailed, fmt.Sprintf("outreach: too many failed authentications from this address: try again in %s", wait.Round(time.Second)))
	}
	opts, _ := lookup(cmd, "options").(bson.D)
	c.skipEmpty, _ = lookup(opts, "skipEmptyExchange").(bool)
	errBlocked := errors.New("too many failed authentications")
	server, err := scram.SHA256.NewServer(func(user string) (scram.StoredCredentials, error) {
		c.convUser = user
		if _, blocked := c.g.fails.blocked(user, ""); blocked {
			return scram.StoredCredentials{}, errBlocked
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cred, err := c.g.auth(ctx, user)
		if err != nil {
			return scram.StoredCredentials{}, err
		}
		return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(cred.Salt), Iters: cred.Iterations},
			StoredKey: cred.StoredKey, ServerKey: cred.ServerKey}, nil
	})
	if err != nil {
		return errorDoc(codeAuthenticationFailed, "outreach: authentication is unavailable")
	}
	conv := server.NewConversation()
	resp, err := conv.Step(payload(cmd))
	if err != nil {
		if errors.Is(err, errBlocked) {
			wait, _ := c.g.fails.blocked(c.convUser, "")
			return errorDoc(codeAuthenticationFailed, fmt.Sprintf("outreach: too many failed authentications for this user: try again in %s", wait.Round(time.Second)))
		}
		return c.failed(err)
	}
	c.conv = conv
	return bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: false},
		{Key: "payload", Value: bson.Binary{Data: []byte(resp)}}, {Key: "ok", Value: 1.0}}
}

// saslContinue takes the client's proof, or the empty message that ends a
// conversation without skipEmptyExchange.
func (c *conn) saslContinue(cmd bson.D) bson.D {
	if c.conv == nil {
		return errorDoc(codeAuthenticationFailed, "outreach: no authentication in progress: send saslStart first")
	}
	if c.convFinal {
		c.conv, c.convFinal = nil, false
		return bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: true},
			{Key: "payload", Value: bson.Binary{Data: []byte{}}}, {Key: "ok", Value: 1.0}}
	}
	resp, err := c.conv.Step(payload(cmd))
	if err != nil || !c.conv.Valid() {
		c.conv = nil
		if err == nil {
			err = errors.New("invalid proof")
		}
		return c.failed(err)
	}
	c.user = c.convUser
	done := c.skipEmpty
	if done {
		c.conv = nil
	} else {
		c.convFinal = true
	}
	return bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: done},
		{Key: "payload", Value: bson.Binary{Data: []byte(resp)}}, {Key: "ok", Value: 1.0}}
}

// failed records a failed authentication and answers it as MongoDB does.
func (c *conn) failed(err error) bson.D {
	c.g.fails.fail(c.convUser, c.remote)
	c.g.log.Info("analyst endpoint: authentication failed", "user", c.convUser, "remote", c.remote, "reason", err.Error())
	c.conv, c.convUser = nil, ""
	return errorDoc(codeAuthenticationFailed, "Authentication failed: the user name is the id of an agent key with the read scope and the password the key itself "+
		"(keys created before this endpoint authenticated have no analyst credential: create a new one)")
}

func payload(cmd bson.D) string {
	switch p := lookup(cmd, "payload").(type) {
	case bson.Binary:
		return string(p.Data)
	case string:
		return p
	}
	return ""
}

// failures rate limits failed authentications.
type failures struct {
	mu     sync.Mutex
	byUser map[string]*rate.Limiter
	byAddr map[string]*rate.Limiter
}

func (f *failures) limiter(m *map[string]*rate.Limiter, key string, every time.Duration, burst int, create bool) *rate.Limiter {
	if *m == nil {
		*m = map[string]*rate.Limiter{}
	}
	l, ok := (*m)[key]
	if !ok && create {
		if len(*m) >= 10000 {
			for k, old := range *m { // forget those that have recovered
				if old.Tokens() >= float64(old.Burst()) {
					delete(*m, k)
				}
			}
		}
		l = rate.NewLimiter(rate.Every(every), burst)
		(*m)[key] = l
	}
	return l
}

// blocked says whether user or addr (either may be empty) has no failed
// attempt left, and how long until it has one.
func (f *failures) blocked(user, addr string) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var wait time.Duration
	check := func(l *rate.Limiter, every time.Duration) {
		if l == nil {
			return
		}
		if t := l.Tokens(); t < 1 {
			if w := time.Duration((1 - t) * float64(every)); w > wait {
				wait = w
			}
		}
	}
	if user != "" {
		check(f.limiter(&f.byUser, user, failEveryUser, failBurstUser, false), failEveryUser)
	}
	if addr != "" {
		check(f.limiter(&f.byAddr, addr, failEveryAddress, failBurstAddress, false), failEveryAddress)
	}
	return max(wait, time.Second), wait > 0
}

func (f *failures) fail(user, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if user != "" {
		f.limiter(&f.byUser, user, failEveryUser, failBurstUser, true).Allow()
	}
	f.limiter(&f.byAddr, addr, failEveryAddress, failBurstAddress, true).Allow()
}
