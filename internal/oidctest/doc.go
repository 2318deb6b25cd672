// Package oidctest runs a real OpenID provider on loopback for tests: the
// zitadel/oidc `op` provider with its example storage and login pages,
// wrapped so a test can change a user's groups at run time, sign with
// RS256 or ES256 and rotate keys, and complete a sign-in without a browser
// (CodeFlowToken walks the authorization code + PKCE flow over HTTP;
// CompleteDevice does the user's half of the device flow).
//
// Users have ID == username (the example device page takes the username
// as the subject) and the password [Password]. The public native client
// [ClientID] has the device, code and refresh grants and any loopback
// redirect (http://127.0.0.1/callback, any port).
//
// It is imported only by tests and enforces no invariant.
package oidctest
