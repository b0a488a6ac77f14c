package embedded

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
)

// TestAnalystConnectionCap: the analyst endpoint serves MaxConnections
// clients at once and closes any more on accept.
func TestAnalystConnectionCap(t *testing.T) {
	s, err := Start(context.Background(), Options{TCP: freeAddr(t), Auth: testUsers(nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	addr := s.PublicURI[len("mongodb://") : len(s.PublicURI)-1]
	ping := func(c net.Conn) error {
		doc, _ := bson.Marshal(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
		msg := replyMessage(request{id: wiremessage.NextRequestID(), reply: true}, doc) // an OP_MSG with one body
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write(msg); err != nil {
			return err
		}
		reply, err := readMessage(c, maxReply)
		if err != nil {
			return err
		}
		_, _, _, op, rem, _ := wiremessage.ReadHeader(reply)
		body, _ := commandDocument(op, rem)
		if ok, _ := bson.Raw(body).Lookup("ok").AsFloat64OK(); ok != 1 {
			return errors.New("ping answered " + bson.Raw(body).String())
		}
		return nil
	}
	var conns []net.Conn
	for range MaxConnections {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := ping(c); err != nil { // served: counted by the gate
			t.Fatalf("connection %d: %v", len(conns)+1, err)
		}
		conns = append(conns, c)
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if err := ping(extra); err == nil {
		t.Errorf("connection %d was served; want it closed on accept", MaxConnections+1)
	}
	if err := ping(conns[0]); err != nil {
		t.Errorf("the first connection after the refused one: %v", err)
	}
}
