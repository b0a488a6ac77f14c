package mailauth

// Without turns the named guard of the sign-in off until the returned
// func turns it on again: spend (a state is used once), nonce (the browser
// that started it), pkce (the verifier), account (the mailbox's address).
func Without(guard string) func() {
	p := map[string]*bool{"spend": &without.spend, "nonce": &without.nonce, "pkce": &without.pkce, "account": &without.account}[guard]
	*p = true
	return func() { *p = false }
}
