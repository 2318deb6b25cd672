package webhook

import "errors"

// Reasons a Verifier rejects a request; test with errors.Is.
var (
	ErrMalformed       = errors.New("webhook: malformed delivery")
	ErrBadSignature    = errors.New("webhook: bad signature")
	ErrStale           = errors.New("webhook: timestamp outside tolerance")
	ErrReplay          = errors.New("webhook: delivery already received")
	ErrReplayCacheFull = errors.New("webhook: replay cache full")
)
