package mailsync

import (
	"errors"

	"github.com/emersion/go-imap/v2"
)

// The mailbox's Sent folder, for the pitches the service sends: the sent
// copy is appended there, so the inbox sync and the thread see it, and a
// sender that stopped part-way looks there for a message it may have sent.
// Both use the inbox's connection and token handling.

// AppendSent appends a sent message to mailbox mbox (created when
// missing), marked seen.
func (s *Syncer) AppendSent(mbox string, raw []byte) error {
	c, err := s.connect()
	if err != nil {
		return &IMAPError{Op: "connect", Err: err}
	}
	defer c.Close()
	if _, err := c.Status(mbox, &imap.StatusOptions{NumMessages: true}).Wait(); err != nil {
		if err := c.Create(mbox, nil).Wait(); err != nil {
			return &IMAPError{Op: "create " + mbox, Err: err}
		}
	}
	cmd := c.Append(mbox, int64(len(raw)), &imap.AppendOptions{Flags: []imap.Flag{imap.FlagSeen}})
	if _, err := cmd.Write(raw); err != nil {
		cmd.Close()
		return &IMAPError{Op: "append " + mbox, Err: err}
	}
	if err := cmd.Close(); err != nil {
		return &IMAPError{Op: "append " + mbox, Err: err}
	}
	if _, err := cmd.Wait(); err != nil {
		return &IMAPError{Op: "append " + mbox, Err: err}
	}
	return c.Logout().Wait()
}

// HasMessageID reports whether mailbox mbox holds a message whose
// Message-ID is id (without angle brackets). A missing mailbox holds none.
func (s *Syncer) HasMessageID(mbox, id string) (bool, error) {
	if id == "" {
		return false, errors.New("no Message-ID to look for")
	}
	c, err := s.connect()
	if err != nil {
		return false, &IMAPError{Op: "connect", Err: err}
	}
	defer c.Close()
	if _, err := c.Select(mbox, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		if _, serr := c.Status(mbox, &imap.StatusOptions{NumMessages: true}).Wait(); serr != nil {
			return false, nil
		}
		return false, &IMAPError{Op: "select " + mbox, Err: err}
	}
	data, err := c.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: "<" + id + ">"}}}, nil).Wait()
	if err != nil {
		return false, &IMAPError{Op: "search " + mbox, Err: err}
	}
	return len(data.AllUIDs()) > 0, c.Logout().Wait()
}
