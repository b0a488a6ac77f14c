package mailsync

import "github.com/emersion/go-imap/v2"

// SetAfterMessage makes s call f after each message it handles (tests cut
// the connection there).
func SetAfterMessage(s *Syncer, f func(uid uint32)) {
	s.afterMessage = func(u imap.UID) { f(uint32(u)) }
}
