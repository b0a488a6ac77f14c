package embedded

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// The analyst endpoint (serve --mongo-listen) is the one door from the
// network to the embedded store, which has no users or roles of its own.
// A gate between each client and the store speaks the MongoDB wire
// protocol on both sides and lets through only what an authenticated
// reader may do, with bounded work:
//
//   - Who: SCRAM-SHA-256, as MongoDB does it, so mongosh, Compass and the
//     drivers connect unchanged. The user name is an agent key's id, the
//     password the key; the Authenticator (wired by the service) says
//     whether that key may read here and gives its verifier. Before that a
//     connection may run hello, isMaster, ping, buildInfo and the SASL
//     handshake, nothing else. The key is checked again before every
//     command: once it is revoked, the next command is refused and the
//     connection closed. Failed attempts are rate limited per user name and
//     per client address.
//   - What: reads only (find, aggregate without $out/$merge, count,
//     distinct, cursors, listings, statistics); never a collection of
//     Options.Hidden, which hold secrets or their verifiers; never $where,
//     $function or $accumulator (code run in the server).
//   - How much: the numbers below. A refusal is a MongoDB error document
//     saying what was refused and what is allowed.
//   - How long: every command forwarded to the store has a time limit, the
//     client's maxTimeMS when it is below MaxTime, else MaxTime. The store
//     stops find and aggregate at their maxTimeMS itself, so they carry it;
//     it refuses maxTimeMS on distinct and ignores it on count, so the gate
//     takes it out of every other command and enforces the limit on its
//     wait for the answer (timeLimit, forward).
//
// Cursors belong to the key that opened them (drivers may continue one on
// another pooled connection, as on MongoDB); another key's cursor, or one
// the gate did not see opened (the service's own), is "not found". The
// cursors a connection opened are killed when it closes.

// Bounds of the analyst endpoint (documented in docs/operations.md, mongosh).
const (
	// MaxConnections is the number of client connections served at once;
	// more are closed on accept.
	MaxConnections = 32
	// MaxBatch is the largest batch of documents one reply carries: a
	// larger batchSize (find, aggregate, getMore) is lowered to it, which
	// changes no result, only how many getMores fetch it. A getMore without
	// batchSize gets MaxBatch.
	MaxBatch = 1000
	// MaxSkip is the largest skip (find, count, $skip); page by a range
	// of an indexed field instead.
	MaxSkip = 100_000
	// MaxCursors is the number of open cursors one connection may hold.
	MaxCursors = 16
	// MaxStages is the number of aggregation stages a command may hold,
	// counting those of nested pipelines ($lookup, $facet, $unionWith).
	MaxStages = 50
	// MaxDepth is the deepest nesting of documents and arrays a command
	// may have.
	MaxDepth = 32
	// MaxTime is the time limit of a command (maxTimeMS): the default, and
	// the most a client may ask for.
	MaxTime = 60 * time.Second
	// MaxRequest is the largest command a client may send.
	MaxRequest = 1 << 20
)

// MongoDB's error codes used by the gate.
const (
	codeBadValue             = 2
	codeUnauthorized         = 13
	codeAuthenticationFailed = 18
	codeCursorNotFound       = 43
	codeMaxTimeMSExpired     = 50
	codeMechanismUnavailable = 334
)

// maxReply bounds a reply read from the store (MongoDB's message limit).
const maxReply = 48_000_000

// engineGrace is how long the gate waits past a time limit the store
// enforces itself (find, aggregate), so that the store's own answer, which
// says where it stopped, arrives first.
const engineGrace = 10 * time.Second

// engineBounded are the commands the store stops at their maxTimeMS.
var engineBounded = map[string]bool{"find": true, "aggregate": true}

// Failed authentications allowed per user name and per client address:
// a burst, then one more per interval.
const (
	failBurstUser    = 5
	failEveryUser    = 12 * time.Second
	failBurstAddress = 20
	failEveryAddress = 3 * time.Second
)

// Credential is a SCRAM-SHA-256 verifier.
type Credential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// Authenticator returns the verifier of user (an agent key's id) when that
// key may read through the analyst endpoint now, or an error saying why not
// (logged by the service; the client is told only that authentication
// failed, or that its key no longer may read).
type Authenticator func(ctx context.Context, user string) (Credential, error)

// gate serves the analyst endpoint.
type gate struct {
	ln       net.Listener
	upstream string // the store's Unix socket
	auth     Authenticator
	hidden   map[string]bool
	fields   map[string][]string // hidden fields, per collection
	log      *slog.Logger
	fails    failures
	wg       sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	conns   map[*conn]struct{}
	cursors map[int64]*cursor
}

type cursor struct {
	user   string
	opener *conn
	ns     string // db.collection
}

func newGate(ln net.Listener, upstream string, auth Authenticator, hidden []string, fields map[string][]string, log *slog.Logger) *gate {
	g := &gate{ln: ln, upstream: upstream, auth: auth, hidden: map[string]bool{}, fields: fields, log: log,
		conns: map[*conn]struct{}{}, cursors: map[int64]*cursor{}}
	for _, h := range hidden {
		g.hidden[h] = true
	}
	return g
}

func (g *gate) serve() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		g.mu.Lock()
		if g.closed || len(g.conns) >= MaxConnections {
			g.mu.Unlock()
			c.Close()
			continue
		}
		cn := &conn{g: g, client: c, remote: remoteHost(c)}
		g.conns[cn] = struct{}{}
		g.wg.Add(1)
		g.mu.Unlock()
		go func() {
			defer g.wg.Done()
			cn.run()
		}()
	}
}

// close stops accepting, ends every connection (a command waiting on the
// store too) and waits for them.
func (g *gate) close() {
	g.ln.Close()
	g.mu.Lock()
	g.closed = true
	for c := range g.conns {
		c.client.Close()
		if c.up != nil {
			c.up.Close()
		}
	}
	g.mu.Unlock()
	g.wg.Wait()
}

// handshakeTimeout bounds a TLS handshake, so that a client that opens a
// connection and says nothing (or garbage) does not hold one of the
// endpoint's connections.
const handshakeTimeout = 10 * time.Second

// handshake runs the TLS handshake before anything is read; a client that
// does not speak TLS (a plain mongosh, garbage) is refused here and the
// connection closed.
func (c *conn) handshake(tc *tls.Conn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.g.log.Warn("analyst endpoint: TLS handshake failed; connection closed (a client without --tls?)", "remote", c.remote, "err", err)
		return false
	}
	return true
}

func remoteHost(c net.Conn) string {
	if h, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil {
		return h
	}
	return c.RemoteAddr().String()
}

// conn is one client connection and its own connection to the store.
type conn struct {
	g      *gate
	client net.Conn
	up     net.Conn
	remote string
	user   string // the authenticated key's id; "" before

	conv      *scram.ServerConversation
	convUser  string
	convWhy   error // why the credential look-up refused
	skipEmpty bool
	convFinal bool // the server's final message was sent; an empty continue ends it
}

func (c *conn) run() {
	defer func() {
		c.killCursors()
		c.client.Close()
		c.g.mu.Lock()
		if c.up != nil {
			c.up.Close()
		}
		delete(c.g.conns, c)
		c.g.mu.Unlock()
	}()
	if tc, ok := c.client.(*tls.Conn); ok && !c.handshake(tc) {
		return
	}
	up, err := net.Dial("unix", c.g.upstream)
	if err != nil {
		return
	}
	c.g.mu.Lock()
	c.up = up // close() reads it under the lock
	closed := c.g.closed
	c.g.mu.Unlock()
	if closed {
		return
	}
	for {
		msg, err := readMessage(c.client, MaxRequest)
		if err != nil {
			return
		}
		out, keep := c.handle(msg)
		if out != nil {
			if _, err := c.client.Write(out); err != nil {
				return
			}
		}
		if !keep {
			return
		}
	}
}

// request is a client's command.
type request struct {
	id     int32
	legacy bool // OP_QUERY on $cmd (the handshake of some drivers)
	reply  bool // the client waits for an answer
	cmd    bson.D
	// sequence: the message carries a document sequence (a write's
	// documents); no read does.
	sequence bool
}

// handle answers one client message; keep is false when the connection
// must end.
func (c *conn) handle(msg []byte) (out []byte, keep bool) {
	req, ok := parseRequest(msg)
	if !ok {
		return nil, false // a message the gate cannot read is not forwarded
	}
	answer := func(doc bson.D) []byte {
		if !req.reply {
			return nil
		}
		raw, err := bson.Marshal(doc)
		if err != nil {
			raw, _ = bson.Marshal(errorDoc(codeBadValue, "outreach: the answer could not be encoded"))
		}
		return replyMessage(req, raw)
	}
	name := req.cmd[0].Key
	lower := strings.ToLower(name)
	if req.legacy && lower != "hello" && lower != "ismaster" {
		return answer(errorDoc(codeUnauthorized, "outreach: legacy OP_QUERY is accepted for the handshake (hello, isMaster) only; use a driver that speaks OP_MSG (MongoDB 3.6 and later)")), true
	}
	switch lower {
	case "hello", "ismaster":
		raw, err := c.hello(req.cmd)
		if err != nil {
			return nil, false
		}
		if !req.reply {
			return nil, true
		}
		return replyMessage(req, raw), true
	case "ping":
		return answer(bson.D{{Key: "ok", Value: 1.0}}), true
	case "buildinfo":
		raw, err := c.forward(bson.D{{Key: "buildInfo", Value: 1}, {Key: "$db", Value: "admin"}}, 10*time.Second)
		if err != nil {
			return nil, false
		}
		return replyMessage(req, raw), true
	case "saslstart":
		return answer(c.saslStart(req.cmd)), true
	case "saslcontinue":
		return answer(c.saslContinue(req.cmd)), true
	case "logout":
		c.user = ""
		return answer(bson.D{{Key: "ok", Value: 1.0}}), true
	}
	if c.user == "" {
		return answer(errorDoc(codeUnauthorized, fmt.Sprintf("outreach: %q requires authentication: connect with the id of an agent key with the read scope as the user name and the key as the password, "+
			"e.g. mongodb://KEY_ID:KEY@HOST/outreach?authMechanism=SCRAM-SHA-256", name))), true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := c.g.auth(ctx, c.user)
	cancel()
	if err != nil {
		c.g.log.Info("analyst endpoint: connection closed, its key may no longer read", "user", c.user, "remote", c.remote, "reason", err.Error())
		return answer(errorDoc(codeUnauthorized, "outreach: the key this connection authenticated with may no longer read here (revoked, archived, expired or without the read scope): the connection is closed")), false
	}
	if !req.reply {
		return nil, true // reads always want an answer; an unacknowledged message is dropped
	}
	if req.sequence {
		return answer(errorDoc(codeUnauthorized, writeRefusal(name))), true
	}
	if refusal, code := c.check(req.cmd); refusal != "" {
		return answer(errorDoc(code, refusal)), true
	}
	switch lower {
	case "connectionstatus":
		return answer(c.connectionStatus(req.cmd)), true
	case "getmore":
		return c.getMore(req)
	case "killcursors":
		return c.killCursorsCommand(req)
	}
	opens := lower == "find" || lower == "aggregate" || lower == "listcollections" || lower == "listindexes"
	if opens && c.openCursors() >= MaxCursors {
		return answer(errorDoc(codeBadValue, fmt.Sprintf("outreach: this connection holds %d open cursors, the most it may: exhaust or kill one (killCursors) before opening another", MaxCursors))), true
	}
	cmd := c.bound(lower, req.cmd)
	limit := timeLimit(req.cmd)
	wait := limit
	if engineBounded[lower] {
		wait += engineGrace
	}
	raw, err := c.forward(cmd, wait)
	if errors.Is(err, errTimedOut) {
		return answer(timedOut(name, limit)), true
	}
	if err != nil {
		return nil, false
	}
	if opens {
		c.track(raw)
	}
	return replyMessage(req, raw), true
}

// readCommands are the commands an authenticated client may send beyond
// the handshake; names in lower case.
var readCommands = map[string]bool{}

func init() {
	for _, n := range []string{
		"find", "aggregate", "count", "distinct", "getMore", "killCursors", "explain",
		"listCollections", "listDatabases", "listIndexes", "dbStats", "collStats", "dataSize",
		"connectionStatus", "getParameter", "getCmdLineOpts", "getLog", "hostInfo", "serverStatus",
		"whatsmyuri", "listCommands", "endSessions", "atlasVersion", "getFreeMonitoringStatus",
	} {
		readCommands[strings.ToLower(n)] = true
	}
}

// queryCommands may be wrapped by explain.
var queryCommands = map[string]bool{"find": true, "aggregate": true, "count": true, "distinct": true}

// allowedStages are the aggregation stages the endpoint accepts.
var allowedStages = map[string]bool{}

func init() {
	for _, s := range []string{"$match", "$sort", "$skip", "$limit", "$project", "$addFields", "$set", "$unset",
		"$unwind", "$count", "$group", "$sortByCount", "$bucket", "$bucketAuto", "$replaceRoot", "$replaceWith",
		"$sample", "$facet", "$lookup", "$graphLookup", "$unionWith", "$redact", "$setWindowFields", "$densify", "$fill"} {
		allowedStages[s] = true
	}
}

// forbiddenOperators run code in the server.
var forbiddenOperators = map[string]bool{"$where": true, "$function": true, "$accumulator": true}

func writeRefusal(what string) string {
	return fmt.Sprintf("outreach: this MongoDB endpoint is read-only, so %q was refused: a write here would change records "+
		"without their change-log entry. Change data through the MCP tools (create_*, update_*, archive_*, rollback_change, rollback_session).", what)
}

// check returns why an authenticated client's command is refused, or "".
func (c *conn) check(cmd bson.D) (string, int) {
	name := cmd[0].Key
	lower := strings.ToLower(name)
	if !readCommands[lower] {
		return writeRefusal(name), codeUnauthorized
	}
	if why := checkShape(cmd, 0); why != "" {
		return why, codeBadValue
	}
	if why, code := c.checkQuery(cmd); why != "" {
		return why, code
	}
	if lower == "explain" {
		inner, ok := cmd[0].Value.(bson.D)
		if !ok || len(inner) == 0 || !queryCommands[strings.ToLower(inner[0].Key)] {
			return "outreach: explain is accepted for find, aggregate, count and distinct only", codeUnauthorized
		}
		return c.checkQuery(inner)
	}
	return "", 0
}

// checkShape refuses documents nested deeper than MaxDepth and the
// operators that run code.
func checkShape(v any, depth int) string {
	if depth > MaxDepth {
		return fmt.Sprintf("outreach: the command nests documents and arrays deeper than %d levels, the most this endpoint accepts", MaxDepth)
	}
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if forbiddenOperators[e.Key] {
				return fmt.Sprintf("outreach: %s runs code in the server and is refused here; use the query and aggregation operators", e.Key)
			}
			if why := checkShape(e.Value, depth+1); why != "" {
				return why
			}
		}
	case bson.A:
		for _, e := range x {
			if why := checkShape(e, depth+1); why != "" {
				return why
			}
		}
	}
	return ""
}

// checkQuery checks the collection a command reads and its bounds.
func (c *conn) checkQuery(cmd bson.D) (string, int) {
	lower := strings.ToLower(cmd[0].Key)
	coll, _ := cmd[0].Value.(string)
	switch lower {
	case "datasize":
		coll, _ = cmd[0].Value.(string)
		if i := strings.Index(coll, "."); i >= 0 {
			coll = coll[i+1:]
		}
	case "getmore":
		coll, _ = lookup(cmd, "collection").(string)
	case "aggregate":
		if _, ok := cmd[0].Value.(string); !ok {
			return "outreach: an aggregation must name a collection (aggregate: 1, on the database, is refused)", codeUnauthorized
		}
	}
	if c.g.hidden[coll] {
		return fmt.Sprintf("outreach: the collection %q is not shown on this endpoint: it holds secrets or their verifiers", coll), codeUnauthorized
	}
	if f := c.g.fields[coll]; len(f) > 0 && mentions(cmd[1:], f) {
		return fmt.Sprintf("outreach: the field %s of %q is not shown on this endpoint: it holds secrets or their verifiers", strings.Join(f, ", "), coll), codeUnauthorized
	}
	if skip, ok := number(lookup(cmd, "skip")); ok && skip > MaxSkip {
		return fmt.Sprintf("outreach: skip %d is more than %d, the most this endpoint accepts: page by a range of an indexed field (e.g. seq or created_at) instead", skip, MaxSkip), codeBadValue
	}
	if limit, ok := number(lookup(cmd, "limit")); ok && limit < -MaxBatch {
		return fmt.Sprintf("outreach: a negative limit asks for one batch of that many documents; at most %d here, or use a positive limit", MaxBatch), codeBadValue
	}
	if lower == "aggregate" {
		stages := 0
		if why, code := c.checkPipeline(lookup(cmd, "pipeline"), &stages); why != "" {
			return why, code
		}
	}
	return "", 0
}

// checkPipeline checks the stages of p and of the pipelines nested in it.
func (c *conn) checkPipeline(p any, stages *int) (string, int) {
	arr, ok := p.(bson.A)
	if !ok {
		return "outreach: pipeline must be an array of stages", codeBadValue
	}
	for _, v := range arr {
		if *stages++; *stages > MaxStages {
			return fmt.Sprintf("outreach: the aggregation has more than %d stages (nested pipelines included), the most this endpoint accepts", MaxStages), codeBadValue
		}
		stage, ok := v.(bson.D)
		if !ok || len(stage) != 1 {
			return "outreach: each pipeline stage must be a document with one field", codeBadValue
		}
		name, arg := stage[0].Key, stage[0].Value
		if name == "$out" || name == "$merge" {
			return writeRefusal("aggregate with " + name), codeUnauthorized
		}
		if !allowedStages[name] {
			return fmt.Sprintf("outreach: the stage %s is not accepted here; accepted: $match, $sort, $skip, $limit, $project, $addFields, $set, $unset, $unwind, $count, $group, $sortByCount, $bucket, $bucketAuto, $replaceRoot, $replaceWith, $sample, $facet, $lookup, $graphLookup, $unionWith, $redact, $setWindowFields, $densify, $fill", name), codeBadValue
		}
		var from string
		var nested []any
		switch name {
		case "$skip":
			if n, ok := number(arg); ok && n > MaxSkip {
				return fmt.Sprintf("outreach: $skip %d is more than %d, the most this endpoint accepts: page by a range of an indexed field instead", n, MaxSkip), codeBadValue
			}
		case "$lookup", "$graphLookup":
			d, _ := arg.(bson.D)
			from, _ = lookup(d, "from").(string)
			if p := lookup(d, "pipeline"); p != nil {
				nested = append(nested, p)
			}
		case "$unionWith":
			switch a := arg.(type) {
			case string:
				from = a
			case bson.D:
				from, _ = lookup(a, "coll").(string)
				if p := lookup(a, "pipeline"); p != nil {
					nested = append(nested, p)
				}
			}
		case "$facet":
			d, _ := arg.(bson.D)
			for _, e := range d {
				nested = append(nested, e.Value)
			}
		}
		if c.g.hidden[from] || len(c.g.fields[from]) > 0 {
			return fmt.Sprintf("outreach: the collection %q is not shown on this endpoint through %s: it holds secrets or their verifiers", from, name), codeUnauthorized
		}
		for _, p := range nested {
			if why, code := c.checkPipeline(p, stages); why != "" {
				return why, code
			}
		}
	}
	return "", 0
}

// timeLimit is the time a command may take: the client's maxTimeMS when it
// is positive and below MaxTime, else MaxTime (0, MongoDB's "no limit", and
// a larger one do not lift the endpoint's).
func timeLimit(cmd bson.D) time.Duration {
	if ms, ok := number(lookup(cmd, "maxTimeMS")); ok && ms > 0 && ms < MaxTime.Milliseconds() {
		return time.Duration(ms) * time.Millisecond
	}
	return MaxTime
}

// timedOut is the answer to a command the gate stopped waiting for.
func timedOut(name string, limit time.Duration) bson.D {
	return errorDoc(codeMaxTimeMSExpired, fmt.Sprintf("operation exceeded time limit: outreach stopped waiting for %q after %d ms "+
		"(its maxTimeMS, or %d ms, the most this endpoint allows): narrow the query, e.g. with a filter on an indexed field", name, limit.Milliseconds(), MaxTime.Milliseconds()))
}

// bound sets the time limit and batch size of a query, and hides the
// hidden collections from listCollections. Only the commands the store
// bounds itself carry maxTimeMS to it (the gate enforces the others').
func (c *conn) bound(lower string, cmd bson.D) bson.D {
	limit := timeLimit(cmd)
	cmd = without(cmd, "maxTimeMS")
	if engineBounded[lower] {
		cmd = append(cmd, bson.E{Key: "maxTimeMS", Value: limit.Milliseconds()})
	}
	coll, _ := cmd[0].Value.(string)
	hiddenFields := c.g.fields[coll]
	switch lower {
	case "find":
		if n, ok := number(lookup(cmd, "batchSize")); ok && n > MaxBatch {
			cmd = set(cmd, "batchSize", int32(MaxBatch))
		}
		// An inclusion projection leaves the hidden fields out already
		// (check refused one that names them); otherwise exclude them.
		proj, _ := lookup(cmd, "projection").(bson.D)
		if len(hiddenFields) > 0 && !inclusion(proj) {
			proj = append(bson.D(nil), proj...)
			for _, f := range hiddenFields {
				proj = append(proj, bson.E{Key: f, Value: int32(0)})
			}
			cmd = set(cmd, "projection", proj)
		}
	case "aggregate":
		if p, ok := lookup(cmd, "pipeline").(bson.A); ok && len(hiddenFields) > 0 {
			unset := bson.A{}
			for _, f := range hiddenFields {
				unset = append(unset, f)
			}
			cmd = set(cmd, "pipeline", append(bson.A{bson.D{{Key: "$unset", Value: unset}}}, p...))
		}
		if cur, ok := lookup(cmd, "cursor").(bson.D); ok {
			if n, ok := number(lookup(cur, "batchSize")); ok && n > MaxBatch {
				cmd = set(cmd, "cursor", set(append(bson.D(nil), cur...), "batchSize", int32(MaxBatch)))
			}
		}
	case "listcollections":
		names := bson.A{}
		for h := range c.g.hidden {
			names = append(names, h)
		}
		visible := bson.D{{Key: "name", Value: bson.D{{Key: "$nin", Value: names}}}}
		if f, ok := lookup(cmd, "filter").(bson.D); ok && len(f) > 0 {
			visible = bson.D{{Key: "$and", Value: bson.A{f, visible}}}
		}
		cmd = set(cmd, "filter", visible)
	}
	return cmd
}

// mentions says whether v names one of fields: as a key (a filter, a
// projection, a sort), a field path ("$sealed") or a string (distinct's key).
func mentions(v any, fields []string) bool {
	names := func(s string) bool {
		s = strings.TrimPrefix(s, "$")
		for _, f := range fields {
			if s == f || strings.HasPrefix(s, f+".") {
				return true
			}
		}
		return false
	}
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if names(e.Key) || mentions(e.Value, fields) {
				return true
			}
		}
	case bson.A:
		for _, e := range x {
			if mentions(e, fields) {
				return true
			}
		}
	case string:
		return names(x)
	}
	return false
}

// inclusion says whether a projection includes fields (so leaves out the
// others): one of its values other than _id's is true or a non-zero number,
// or an expression.
func inclusion(proj bson.D) bool {
	for _, e := range proj {
		if e.Key == "_id" {
			continue
		}
		switch v := e.Value.(type) {
		case bool:
			if v {
				return true
			}
		case int32, int64, float64:
			if n, _ := number(v); n != 0 {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// getMore continues a cursor of this connection's key.
func (c *conn) getMore(req request) ([]byte, bool) {
	id, _ := lookup(req.cmd, "getMore").(int64)
	if !c.owns(id) {
		return replyDoc(req, errorDoc(codeCursorNotFound, fmt.Sprintf("cursor id %d not found", id))), true
	}
	// maxTimeMS on a getMore is for awaitData cursors, which the store has
	// not; drivers running it as a plain command (with a timeout) send one.
	// A batch gets the endpoint's limit.
	cmd := without(req.cmd, "maxTimeMS")
	if n, ok := number(lookup(cmd, "batchSize")); !ok || n <= 0 || n > MaxBatch {
		cmd = set(cmd, "batchSize", int32(MaxBatch))
	}
	raw, err := c.forward(cmd, MaxTime)
	if errors.Is(err, errTimedOut) {
		return replyDoc(req, timedOut("getMore", MaxTime)), true
	}
	if err != nil {
		return nil, false
	}
	next, ok := bson.Raw(raw).Lookup("cursor", "id").Int64OK()
	code, _ := bson.Raw(raw).Lookup("code").AsInt64OK()
	if (ok && next == 0) || code == codeCursorNotFound {
		c.g.mu.Lock()
		delete(c.g.cursors, id)
		c.g.mu.Unlock()
	}
	return replyMessage(req, raw), true
}

// killCursorsCommand kills cursors of this connection's key only.
func (c *conn) killCursorsCommand(req request) ([]byte, bool) {
	ids, _ := lookup(req.cmd, "cursors").(bson.A)
	for _, v := range ids {
		id, _ := v.(int64)
		if !c.owns(id) {
			return replyDoc(req, errorDoc(codeCursorNotFound, fmt.Sprintf("cursor id %d not found", id))), true
		}
	}
	raw, err := c.forward(req.cmd, 30*time.Second)
	if err != nil {
		return nil, false
	}
	c.g.mu.Lock()
	for _, v := range ids {
		id, _ := v.(int64)
		delete(c.g.cursors, id)
	}
	c.g.mu.Unlock()
	return replyMessage(req, raw), true
}

func (c *conn) owns(id int64) bool {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	cur, ok := c.g.cursors[id]
	return ok && id != 0 && cur.user == c.user
}

func (c *conn) openCursors() int {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	n := 0
	for _, cur := range c.g.cursors {
		if cur.opener == c {
			n++
		}
	}
	return n
}

// track records the cursor a reply opened.
func (c *conn) track(raw []byte) {
	id, ok := bson.Raw(raw).Lookup("cursor", "id").Int64OK()
	if !ok || id == 0 {
		return
	}
	ns, _ := bson.Raw(raw).Lookup("cursor", "ns").StringValueOK()
	c.g.mu.Lock()
	c.g.cursors[id] = &cursor{user: c.user, opener: c, ns: ns}
	c.g.mu.Unlock()
}

// killCursors kills, in the store, the cursors this connection opened that
// are still open; the connection is closing.
func (c *conn) killCursors() {
	c.g.mu.Lock()
	byNS := map[string]bson.A{}
	for id, cur := range c.g.cursors {
		if cur.opener == c {
			byNS[cur.ns] = append(byNS[cur.ns], id)
			delete(c.g.cursors, id)
		}
	}
	c.g.mu.Unlock()
	if len(byNS) == 0 || c.up == nil {
		return
	}
	for ns, ids := range byNS {
		db, coll, ok := strings.Cut(ns, ".")
		if !ok {
			continue
		}
		if _, err := c.forward(bson.D{{Key: "killCursors", Value: coll}, {Key: "cursors", Value: ids}, {Key: "$db", Value: db}}, 10*time.Second); err != nil {
			return
		}
	}
}

func (c *conn) connectionStatus(cmd bson.D) bson.D {
	db, _ := lookup(cmd, "$db").(string)
	return bson.D{{Key: "authInfo", Value: bson.D{
		{Key: "authenticatedUsers", Value: bson.A{bson.D{{Key: "user", Value: c.user}, {Key: "db", Value: db}}}},
		{Key: "authenticatedUserRoles", Value: bson.A{bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: db}}}},
	}}, {Key: "ok", Value: 1.0}}
}

// hello asks the store the handshake's answer with a plain hello (no
// speculative authentication, no streaming) and adds the mechanism this
// endpoint offers.
func (c *conn) hello(cmd bson.D) ([]byte, error) {
	ask := bson.D{{Key: cmd[0].Key, Value: 1}}
	if v := lookup(cmd, "helloOk"); v != nil {
		ask = append(ask, bson.E{Key: "helloOk", Value: v})
	}
	ask = append(ask, bson.E{Key: "$db", Value: "admin"})
	raw, err := c.forward(ask, 10*time.Second)
	if err != nil {
		return nil, err
	}
	var reply bson.D
	if err := bson.Unmarshal(raw, &reply); err != nil {
		return nil, err
	}
	out := bson.D{}
	for _, e := range reply {
		switch e.Key {
		case "speculativeAuthenticate", "saslSupportedMechs", "ok":
		default:
			out = append(out, e)
		}
	}
	if lookup(cmd, "saslSupportedMechs") != nil {
		out = append(out, bson.E{Key: "saslSupportedMechs", Value: bson.A{"SCRAM-SHA-256"}})
	}
	out = append(out, bson.E{Key: "ok", Value: 1.0})
	return bson.Marshal(out)
}

// errTimedOut: the store did not begin its answer within the limit. The
// connection to it stays usable: the command goes on in the store (closing
// the connection would not stop it), and the next forward skips its
// answer, so each client connection has at most one command in the store.
var errTimedOut = errors.New("the store did not answer in time")

// forward sends cmd to the store and returns its answer's body. Past limit
// it returns errTimedOut; any other error (the connection broke, or the
// time ran out in the middle of an answer) ends the client's connection.
func (c *conn) forward(cmd bson.D, limit time.Duration) ([]byte, error) {
	doc, err := bson.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	reqID := wiremessage.NextRequestID()
	idx, msg := wiremessage.AppendHeaderStart(nil, reqID, 0, wiremessage.OpMsg)
	msg = wiremessage.AppendMsgFlags(msg, 0)
	msg = wiremessage.AppendMsgSectionType(msg, wiremessage.SingleDocument)
	msg = append(msg, doc...)
	msg = bsoncore.UpdateLength(msg, idx, int32(len(msg[idx:])))
	if err := c.up.SetDeadline(time.Now().Add(limit)); err != nil {
		return nil, err
	}
	if _, err := c.up.Write(msg); err != nil {
		return nil, err
	}
	for {
		reply, err := readMessage(c.up, maxReply)
		if errors.Is(err, errNothingRead) {
			return nil, errTimedOut
		}
		if err != nil {
			return nil, err
		}
		_, _, respTo, op, rem, ok := wiremessage.ReadHeader(reply)
		if !ok || op != wiremessage.OpMsg {
			return nil, errors.New("unexpected answer from the store")
		}
		if respTo != reqID {
			continue
		}
		body, ok := commandDocument(op, rem)
		if !ok {
			return nil, errors.New("unreadable answer from the store")
		}
		return body, nil
	}
}
