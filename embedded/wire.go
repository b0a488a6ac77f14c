package embedded

// Reading and writing MongoDB wire messages for the analyst endpoint, and
// small helpers over command documents.

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// parseRequest reads a client message: an OP_MSG with one body section,
// or an OP_QUERY on a $cmd collection.
func parseRequest(msg []byte) (request, bool) {
	_, reqID, _, op, rem, ok := wiremessage.ReadHeader(msg)
	if !ok {
		return request{}, false
	}
	var body bsoncore.Document
	req := request{id: reqID, reply: true}
	switch op {
	case wiremessage.OpMsg:
		flags, rest, ok := wiremessage.ReadMsgFlags(rem)
		if !ok || flags&wiremessage.ChecksumPresent != 0 {
			return request{}, false
		}
		req.reply = flags&wiremessage.MoreToCome == 0
		for len(rest) > 0 {
			var kind wiremessage.SectionType
			if kind, rest, ok = wiremessage.ReadMsgSectionType(rest); !ok {
				return request{}, false
			}
			switch kind {
			case wiremessage.SingleDocument:
				if body != nil {
					return request{}, false
				}
				if body, rest, ok = wiremessage.ReadMsgSectionSingleDocument(rest); !ok {
					return request{}, false
				}
			case wiremessage.DocumentSequence:
				// A write's documents: the command is refused, whatever it is.
				if _, _, rest, ok = wiremessage.ReadMsgSectionRawDocumentSequence(rest); !ok {
					return request{}, false
				}
				req.sequence = true
			default:
				return request{}, false
			}
		}
		if body == nil {
			return request{}, false
		}
	case wiremessage.OpQuery:
		req.legacy = true
		if body, ok = commandDocument(op, rem); !ok {
			return request{}, false
		}
	default:
		return request{}, false
	}
	if body.Validate() != nil {
		return request{}, false
	}
	if err := bson.Unmarshal(body, &req.cmd); err != nil || len(req.cmd) == 0 {
		return request{}, false
	}
	return req, true
}

// replyMessage wraps a reply body for the client, in the form it asked in.
func replyMessage(req request, body []byte) []byte {
	if !req.reply {
		return nil
	}
	if req.legacy {
		idx, b := wiremessage.AppendHeaderStart(nil, wiremessage.NextRequestID(), req.id, wiremessage.OpReply)
		b = wiremessage.AppendReplyFlags(b, 0)
		b = wiremessage.AppendReplyCursorID(b, 0)
		b = wiremessage.AppendReplyStartingFrom(b, 0)
		b = wiremessage.AppendReplyNumberReturned(b, 1)
		b = append(b, body...)
		return bsoncore.UpdateLength(b, idx, int32(len(b[idx:])))
	}
	idx, b := wiremessage.AppendHeaderStart(nil, wiremessage.NextRequestID(), req.id, wiremessage.OpMsg)
	b = wiremessage.AppendMsgFlags(b, 0)
	b = wiremessage.AppendMsgSectionType(b, wiremessage.SingleDocument)
	b = append(b, body...)
	return bsoncore.UpdateLength(b, idx, int32(len(b[idx:])))
}

func replyDoc(req request, doc bson.D) []byte {
	raw, err := bson.Marshal(doc)
	if err != nil {
		panic(errors.New("marshal a reply: " + err.Error()))
	}
	return replyMessage(req, raw)
}

func errorDoc(code int, msg string) bson.D {
	names := map[int]string{codeBadValue: "BadValue", codeUnauthorized: "Unauthorized", codeAuthenticationFailed: "AuthenticationFailed",
		codeCursorNotFound: "CursorNotFound", codeMaxTimeMSExpired: "MaxTimeMSExpired", codeMechanismUnavailable: "MechanismUnavailable"}
	return bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: msg}, {Key: "code", Value: int32(code)}, {Key: "codeName", Value: names[code]}}
}

// errNothingRead: the reader's deadline passed before a message began.
var errNothingRead = errors.New("no message before the deadline")

// readMessage reads one whole wire message of at most limit bytes. A
// deadline that passes before its first byte is errNothingRead (the stream
// is still whole); one that passes later is an error like any other.
func readMessage(r io.Reader, limit int32) ([]byte, error) {
	var head [4]byte
	if n, err := io.ReadFull(r, head[:]); err != nil {
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, errNothingRead
		}
		return nil, err
	}
	n := int32(head[0]) | int32(head[1])<<8 | int32(head[2])<<16 | int32(head[3])<<24
	if n < 16 || n > limit {
		return nil, fmt.Errorf("wire message of %d bytes", n)
	}
	msg := make([]byte, n)
	copy(msg, head[:])
	if _, err := io.ReadFull(r, msg[4:]); err != nil {
		return nil, err
	}
	return msg, nil
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

// lookup returns the value of key in d, or nil.
func lookup(d bson.D, key string) any {
	for _, e := range d {
		if e.Key == key {
			return e.Value
		}
	}
	return nil
}

// without returns a copy of d without key (every occurrence).
func without(d bson.D, key string) bson.D {
	out := make(bson.D, 0, len(d))
	for _, e := range d {
		if e.Key != key {
			out = append(out, e)
		}
	}
	return out
}

// set replaces or appends key in d.
func set(d bson.D, key string, v any) bson.D {
	for i, e := range d {
		if e.Key == key {
			d[i].Value = v
			return d
		}
	}
	return append(d, bson.E{Key: key, Value: v})
}

// number reads an integer-valued BSON number.
func number(v any) (int64, bool) {
	switch n := v.(type) {
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		if math.IsNaN(n) {
			return 0, false
		}
		if n > math.MaxInt64 {
			return math.MaxInt64, true
		}
		if n < math.MinInt64 {
			return math.MinInt64, true
		}
		return int64(n), true
	case bson.Decimal128:
		if f, err := strconv.ParseFloat(n.String(), 64); err == nil {
			return number(f)
		}
	}
	return 0, false
}
