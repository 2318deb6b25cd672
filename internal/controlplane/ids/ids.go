package ids

import "crypto/rand"

// Run is a new run id.
func Run() string { return "r_" + Token() }

// Token is 12 random characters of a readable alphabet (no i, l, o, u).
func Token() string {
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
