package embedded

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// The embedded store has no users or roles (FerretDB v1 with SQLite), so the
// wire endpoint offered to people (serve --mongo-listen) is made read-only at
// the wire: a gate between the client and the store reads the name of every
// command and forwards only reads. Everything else is answered by the gate
// with a MongoDB error document (code 13, Unauthorized) saying why and where
// to go instead, and never reaches the store. A write there would change a
// record without its change-log entry.

// ReadOnlyCode is the MongoDB error code a refused command gets (Unauthorized).
const ReadOnlyCode = 13

// readCommands are the commands a read-only endpoint forwards: queries,
// cursors, listings, statistics and the handshake and diagnostics that
// mongosh and the drivers send. Names are compared in lower case.
var readCommands = map[string]bool{}

func init() {
	for _, c := range []string{
		"find", "aggregate", "count", "distinct", "getMore", "killCursors", "explain",
		"listCollections", "listDatabases", "listIndexes", "dbStats", "collStats", "dataSize", "validate",
		"hello", "isMaster", "ping", "buildInfo", "connectionStatus", "getParameter", "getCmdLineOpts",
		"getLog", "hostInfo", "serverStatus", "whatsmyuri", "listCommands", "endSessions",
		"saslStart", "saslContinue", "logout", "atlasVersion", "getFreeMonitoringStatus",
	} {
		readCommands[strings.ToLower(c)] = true
	}
}

// maxMessage bounds one wire message (MongoDB's own limit is 48 MB).
const maxMessage = 48 << 20

// gate accepts connections on ln and relays them to upstream, refusing
// every command that is not a read. It returns when ln is closed.
func gate(ln net.Listener, upstream string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go relay(c, upstream)
	}
}

func relay(client net.Conn, upstream string) {
	defer client.Close()
	up, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer up.Close()
	var mu sync.Mutex // the client receives whole messages from two writers
	go func() {
		defer client.Close()
		for {
			msg, err := readMessage(up)
			if err != nil {
				return
			}
			mu.Lock()
			_, err = client.Write(msg)
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	for {
		msg, err := readMessage(client)
		if err != nil {
			return
		}
		name, reqID, reply, legacy, ok := inspect(msg)
		if !ok {
			return // a message the gate cannot read is not forwarded: the connection ends
		}
		if refusal := refuse(name, msg); refusal == "" {
			if _, err := up.Write(msg); err != nil {
				return
			}
			continue
		} else if !reply {
			continue // an unacknowledged write: dropped, as the client expects no answer
		} else if legacy {
			return // a refused legacy query cannot be answered in OP_MSG: the connection ends
		} else {
			mu.Lock()
			_, err = client.Write(errorReply(reqID, refusal))
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}
}

// readMessage reads one whole wire message.
func readMessage(r io.Reader) ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	n := int32(head[0]) | int32(head[1])<<8 | int32(head[2])<<16 | int32(head[3])<<24
	if n < 16 || n > maxMessage {
		return nil, fmt.Errorf("wire message of %d bytes", n)
	}
	msg := make([]byte, n)
	copy(msg, head[:])
	if _, err := io.ReadFull(r, msg[4:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// inspect returns the command a request carries, its request id and whether
// the client waits for an answer, and whether it is a legacy OP_QUERY; ok is
// false for messages the gate does not read (compressed or legacy operations
// other than a command query).
func inspect(msg []byte) (name string, reqID int32, reply, legacy, ok bool) {
	_, reqID, _, op, rem, ok := wiremessage.ReadHeader(msg)
	if !ok {
		return "", 0, false, false, false
	}
	body, ok := commandDocument(op, rem)
	if !ok {
		return "", 0, false, false, false
	}
	elem, err := body.IndexErr(0)
	if err != nil {
		return "", 0, false, false, false
	}
	legacy = op == wiremessage.OpQuery
	return elem.Key(), reqID, legacy || !wiremessage.IsMsgMoreToCome(msg), legacy, true
}

// commandDocument finds the command document of an OP_MSG (its body
// section) or of a legacy OP_QUERY on a $cmd collection (the handshake).
func commandDocument(op wiremessage.OpCode, rem []byte) (bsoncore.Document, bool) {
	switch op {
	case wiremessage.OpMsg:
		flags, rem, ok := wiremessage.ReadMsgFlags(rem)
		if !ok {
			return nil, false
		}
		if flags&wiremessage.ChecksumPresent != 0 {
			if len(rem) < 4 {
				return nil, false
			}
			rem = rem[:len(rem)-4]
		}
		for len(rem) > 0 {
			var kind wiremessage.SectionType
			if kind, rem, ok = wiremessage.ReadMsgSectionType(rem); !ok {
				return nil, false
			}
			switch kind {
			case wiremessage.SingleDocument:
				doc, _, ok := wiremessage.ReadMsgSectionSingleDocument(rem)
				return doc, ok && doc.Validate() == nil
			case wiremessage.DocumentSequence:
				if _, _, rem, ok = wiremessage.ReadMsgSectionRawDocumentSequence(rem); !ok {
					return nil, false
				}
			default:
				return nil, false
			}
		}
	case wiremessage.OpQuery:
		_, rem, ok := wiremessage.ReadQueryFlags(rem)
		if !ok {
			return nil, false
		}
		var ns string
		if ns, rem, ok = wiremessage.ReadQueryFullCollectionName(rem); !ok || !strings.HasSuffix(ns, ".$cmd") {
			return nil, false
		}
		if _, rem, ok = wiremessage.ReadQueryNumberToSkip(rem); !ok {
			return nil, false
		}
		if _, rem, ok = wiremessage.ReadQueryNumberToReturn(rem); !ok {
			return nil, false
		}
		doc, _, ok := bsoncore.ReadDocument(rem)
		return doc, ok && doc.Validate() == nil
	}
	return nil, false
}

// refuse returns why the command name (in msg) is not let through, or "".
func refuse(name string, msg []byte) string {
	lower := strings.ToLower(name)
	if !readCommands[lower] {
		return refusalText(name)
	}
	if lower != "aggregate" && lower != "explain" {
		return ""
	}
	// An aggregation writes with $out or $merge; explain wraps another command.
	_, _, _, op, rem, _ := wiremessage.ReadHeader(msg)
	doc, _ := commandDocument(op, rem)
	if lower == "explain" {
		inner, ok := doc.Lookup("explain").DocumentOK()
		if !ok {
			return refusalText(name)
		}
		first, err := inner.IndexErr(0)
		if err != nil || !readCommands[strings.ToLower(first.Key())] || strings.EqualFold(first.Key(), "explain") {
			return refusalText(name)
		}
		doc = inner
		if !strings.EqualFold(first.Key(), "aggregate") {
			return ""
		}
	}
	stages, ok := doc.Lookup("pipeline").ArrayOK()
	if !ok {
		return ""
	}
	values, err := stages.Values()
	if err != nil {
		return refusalText(name)
	}
	for _, v := range values {
		stage, ok := v.DocumentOK()
		if !ok {
			continue
		}
		if first, err := stage.IndexErr(0); err == nil && (first.Key() == "$out" || first.Key() == "$merge") {
			return refusalText(name + " with " + first.Key())
		}
	}
	return ""
}

func refusalText(what string) string {
	return fmt.Sprintf("outreach: this MongoDB endpoint is read-only, so %q was refused: a write here would change records "+
		"without their change-log entry. Change data through the MCP tools (create_*, update_*, archive_*, rollback_change, "+
		"rollback_session), or start the server with --mongo-allow-writes to allow writes on this endpoint.", what)
}

// errorReply is an OP_MSG answer to request reqID carrying a MongoDB error.
func errorReply(reqID int32, msg string) []byte {
	doc, err := bson.Marshal(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: msg},
		{Key: "code", Value: int32(ReadOnlyCode)}, {Key: "codeName", Value: "Unauthorized"}})
	if err != nil {
		panic(errors.New("marshal a fixed document: " + err.Error()))
	}
	idx, b := wiremessage.AppendHeaderStart(nil, wiremessage.NextRequestID(), reqID, wiremessage.OpMsg)
	b = wiremessage.AppendMsgFlags(b, 0)
	b = wiremessage.AppendMsgSectionType(b, wiremessage.SingleDocument)
	b = append(b, doc...)
	return bsoncore.UpdateLength(b, idx, int32(len(b[idx:])))
}
